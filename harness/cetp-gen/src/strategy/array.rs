//! Arrays: the positions with a strategy of their own (`prefixItems`,
//! `contains` matches, an invalid value's forced item), a tail under
//! `items`, the length bounds and `uniqueItems`.

use super::*;

impl Gen {
    pub(crate) fn item_conj(f: &Flat, i: usize) -> Vec<Loc> {
        let mut c = Vec::new();
        for part in &f.arrays {
            if let Some(l) = part.prefix.get(i) {
                c.push(l.clone());
            } else if let Some(l) = &part.items {
                c.push(l.clone());
            }
        }
        c
    }

    /// Arrays: the positions with their own strategy (prefixes, `contains`
    /// matches, the forced slot of an invalid value), then a tail, cut to
    /// the drawn length; filtered on `uniqueItems`.
    pub(super) fn gen_array(
        &self,
        f: &Flat,
        depth: usize,
    ) -> Result<BoxedStrategy<Json>, GenError> {
        let shape = array_shape(f)?;
        let lo = shape.lo;
        if depth >= MAX_DEPTH {
            if lo > 0 {
                let at = f.nodes.first().map_or("", |l| l.eval.as_str());
                return Err(GenError::new(
                    Kind::TooDeep,
                    "minItems",
                    at,
                    "needs items nested deeper than the generator's bound",
                ));
            }
            return Ok(Just(Json::Array(vec![])).boxed());
        }
        let extra = EXTRA_ITEMS[depth];
        // hi_decl >= lo was checked by array_shape.
        let mut gen_hi = shape
            .hi_decl
            .map_or(usize::MAX, |h| h as usize)
            .min(lo + extra)
            .min(MAX_ITEMS as usize)
            .max(lo);
        let fixed = self.fixed_items(f, &shape, &mut gen_hi, depth)?;
        let tail = self.tail_items(f, &shape, fixed.len(), &mut gen_hi, depth)?;
        Ok(assemble_array(f, fixed, tail, lo, gen_hi))
    }

    /// The strategies of the positions before the tail; a position past
    /// the minimum length whose schema cannot be generated locally ends
    /// the array there (`gen_hi` is lowered to it).
    fn fixed_items(
        &self,
        f: &Flat,
        shape: &ArrayShape,
        gen_hi: &mut usize,
        depth: usize,
    ) -> Result<Vec<BoxedStrategy<Json>>, GenError> {
        let mut fixed: Vec<BoxedStrategy<Json>> = Vec::new();
        for i in 0..shape.fixed_len.min(*gen_hi) {
            let strat = if shape.forced_at == Some(i) {
                match &f.force {
                    Some(Force::Item(_, s)) | Some(Force::Tail(s)) => Ok(s.clone()),
                    _ => unreachable!("forced_at comes from an item force"),
                }
            } else {
                let mut conj = Self::item_conj(f, i);
                if (i as u64) < shape.contains_n {
                    conj.extend(f.contains.iter().map(|s| s.loc.child("contains")));
                }
                self.strategy(&conj, depth + 1)
            };
            match strat {
                Ok(s) => fixed.push(s),
                Err(e) if e.is_local() && i >= shape.lo => {
                    *gen_hi = i;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(fixed)
    }

    /// The items after the `k` fixed ones, as many as the drawn length
    /// needs; none when their schema cannot be generated locally and the
    /// minimum length is already met (`gen_hi` is then lowered to `k`).
    fn tail_items(
        &self,
        f: &Flat,
        shape: &ArrayShape,
        k: usize,
        gen_hi: &mut usize,
        depth: usize,
    ) -> Result<BoxedStrategy<Vec<Json>>, GenError> {
        let lo = shape.lo;
        let tail = if *gen_hi > k {
            let conj = Self::item_conj(f, shape.fixed_len.max(shape.prefix_len));
            match self.strategy(&conj, depth + 1) {
                Ok(s) => Some(s),
                Err(e) if e.is_local() && lo <= k => {
                    *gen_hi = k;
                    None
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        Ok(match tail {
            Some(t) => proptest::collection::vec(t, lo.saturating_sub(k)..=*gen_hi - k).boxed(),
            None => Just(vec![]).boxed(),
        })
    }
}

/// The length bounds of an array and its positions with their own
/// strategy, as [`array_shape`] settles them.
struct ArrayShape {
    /// The fewest items: `minItems`, raised by `minContains`, the forced
    /// slot and a duplicate to make.
    lo: usize,
    /// `maxItems`, checked to be at least `lo`.
    hi_decl: Option<u64>,
    /// The longest `prefixItems`.
    prefix_len: usize,
    /// Positions with their own strategy: the prefixes, the forced slot,
    /// and the `contains` matches.
    fixed_len: usize,
    /// The first this many positions match every `contains`.
    contains_n: u64,
    /// The position of an invalid value's forced item.
    forced_at: Option<usize>,
}

/// The length bounds and fixed positions of an array, or the error naming
/// the count no generated array can meet.
fn array_shape(f: &Flat) -> Result<ArrayShape, GenError> {
    let mut lo = f.min_items.as_ref().map_or(0, |x| x.0);
    if lo > MAX_ITEMS {
        let src = &f.min_items.as_ref().expect("lo > 0").1;
        return Err(GenError::new(
            Kind::Unsupported,
            "minItems",
            &src.loc.eval,
            format!("asks for {lo} items, more than the generator's bound of {MAX_ITEMS}"),
        ));
    }
    let prefix_len = f.arrays.iter().map(|p| p.prefix.len()).max().unwrap_or(0);
    let mut fixed_len = prefix_len;
    let contains_n = if f.contains.is_empty() {
        0
    } else {
        f.min_contains.max(1)
    };
    if contains_n > MAX_ITEMS {
        let src = &f.contains[0];
        return Err(GenError::new(
            Kind::Unsupported,
            "minContains",
            &src.loc.eval,
            format!("asks for {contains_n} matches, more than the generator's bound of {MAX_ITEMS} items"),
        ));
    }
    if contains_n > 0 {
        fixed_len = fixed_len.max(contains_n as usize);
        lo = lo.max(contains_n);
    }
    let forced_at = match &f.force {
        Some(Force::Item(i, _)) => Some(*i),
        Some(Force::Tail(_)) => Some(prefix_len),
        _ => None,
    };
    if let Some(i) = forced_at {
        fixed_len = fixed_len.max(i + 1);
        lo = lo.max(i as u64 + 1);
    }
    if f.negs.iter().any(|n| matches!(n, Neg::Duplicate)) {
        lo = lo.max(2);
    }
    let hi_decl = f.max_items.as_ref().map(|x| x.0);
    if let (Some(h), Some((_, src))) = (hi_decl, &f.max_items) {
        if h < lo {
            return Err(unsat(
                src.kw,
                &src.loc.eval,
                format!("({h}) is below the {lo} items needed"),
            ));
        }
    }
    Ok(ArrayShape {
        lo: lo as usize,
        hi_decl,
        prefix_len,
        fixed_len,
        contains_n,
        forced_at,
    })
}

/// One array of `lo..=gen_hi` items from the fixed positions and the tail;
/// an invalid value that must repeat an item gets its first one last, and
/// a valid one is filtered on `uniqueItems`.
fn assemble_array(
    f: &Flat,
    fixed: Vec<BoxedStrategy<Json>>,
    tail: BoxedStrategy<Vec<Json>>,
    lo: usize,
    gen_hi: usize,
) -> BoxedStrategy<Json> {
    let duplicate = f.negs.iter().any(|n| matches!(n, Neg::Duplicate));
    let s = (fixed, tail, lo..=gen_hi)
        .prop_map(move |(fixed, tail, n)| {
            let mut v: Vec<Json> = fixed.into_iter().chain(tail).take(n).collect();
            if duplicate && v.len() >= 2 {
                let last = v.len() - 1;
                v[last] = v[0].clone();
            }
            Json::Array(v)
        })
        .boxed();
    match (&f.unique, duplicate) {
        (Some(src), false) => budget::filter(
            s,
            Label::new(src.kw, &src.loc.eval),
            "`uniqueItems`: a repeated item",
            |v| {
                let a = v.as_array().expect("an array");
                a.iter()
                    .enumerate()
                    .all(|(i, x)| a[..i].iter().all(|y| !json_eq(x, y)))
            },
        ),
        _ => s,
    }
}

//! Numbers: integers and floats within the bounds, multiples of every
//! `multipleOf` (integer multiples by their least common multiple,
//! a fractional one as k·m judged by the validator).

use super::*;

impl Gen {
    /// Numbers: from the bounds and the integer multiples, or as k·m for a
    /// fractional `multipleOf` m.
    pub(super) fn gen_number(&self, f: &Flat, types: u8) -> Result<BoxedStrategy<Json>, GenError> {
        check_number_bounds(f)?;
        let int_ms: Vec<i64> = f
            .multiple_of
            .iter()
            .filter(|(m, _)| m.fract() == 0.0 && *m <= 9.0e15)
            .map(|(m, _)| *m as i64)
            .collect();
        let frac_ms: Vec<&(f64, _)> = f
            .multiple_of
            .iter()
            .filter(|(m, _)| m.fract() != 0.0 || *m > 9.0e15)
            .collect();
        let alts = if frac_ms.is_empty() {
            integer_multiple_numbers(f, types, &int_ms)?
        } else {
            vec![self.fractional_multiple_numbers(f, types, &int_ms, &frac_ms)?]
        };
        if alts.is_empty() {
            let (kw, at) = f
                .multiple_of
                .first()
                .map(|(_, s)| (s.kw, s.loc.eval.clone()))
                .or_else(|| f.max.as_ref().map(|b| (b.src.kw, b.src.loc.eval.clone())))
                .unwrap_or(("type", String::new()));
            return Err(unsat(
                kw,
                &at,
                "leaves no number of the allowed type within the bounds",
            ));
        }
        Ok(Union::new(alts).boxed())
    }

    /// Fractional multiples: k·m drawn, then judged by the validator, since
    /// k·m in floating point is not always a multiple of m the way the
    /// validator computes it.
    fn fractional_multiple_numbers(
        &self,
        f: &Flat,
        types: u8,
        int_ms: &[i64],
        frac_ms: &[&(f64, Src)],
    ) -> Result<BoxedStrategy<Json>, GenError> {
        let (m, src) = frac_ms[0];
        let lo = f.min.as_ref().map_or(-FLOAT_SPAN, |b| b.v) / m;
        let hi = f.max.as_ref().map_or(FLOAT_SPAN, |b| b.v) / m;
        let (klo, khi) = (
            lo.ceil().max(-FLOAT_SPAN) as i64,
            hi.floor().min(FLOAT_SPAN) as i64,
        );
        if klo > khi {
            return Err(unsat(
                src.kw,
                &src.loc.eval,
                "has no multiple within the bounds",
            ));
        }
        let m = *m;
        let int_only = types & FLOAT == 0;
        let vs = self.validators(f.multiple_of.iter().map(|x| &x.1.loc))?;
        let mut source = (klo..=khi)
            .prop_map(move |k| Json::from(k as f64 * m))
            .boxed();
        // Integers that are multiples of a decimal fraction a·10^-d are the
        // multiples of a / gcd(a, 10^d): drawn as such when only integers
        // will do (k·m is then rarely an integer).
        if int_only && frac_ms.len() == 1 {
            if let Some(step) = integer_step(m).and_then(|st| lcm_all(st, int_ms)) {
                let mut ints = vec![source];
                if let Some(s) = int_strategy(f, step) {
                    ints.push(s);
                }
                if f.min
                    .as_ref()
                    .is_none_or(|b| b.v < 0.0 || (b.v == 0.0 && !b.excl))
                    && f.max
                        .as_ref()
                        .is_none_or(|b| b.v > 0.0 || (b.v == 0.0 && !b.excl))
                {
                    ints.push(Just(Json::from(0)).boxed());
                }
                source = Union::new(ints).boxed();
            }
        }
        Ok(budget::filter(
            source,
            Label::new(src.kw, &src.loc.eval),
            "k·multipleOf is not a multiple in floating point",
            move |v| (!int_only || type_of(v) == INT) && vs.iter().all(|x| x.is_valid(v)),
        ))
    }
}

/// The lower bound above the upper one leaves no number.
fn check_number_bounds(f: &Flat) -> Result<(), GenError> {
    if let (Some(lo), Some(hi)) = (&f.min, &f.max) {
        if lo.v > hi.v || (lo.v == hi.v && (lo.excl || hi.excl)) {
            return Err(unsat(
                hi.src.kw,
                &hi.src.loc.eval,
                format!(
                    "({}) leaves no number above `{}` ({})",
                    hi.v, lo.src.kw, lo.v
                ),
            ));
        }
    }
    Ok(())
}

/// Numbers whose multiples are all integers (or none): integers of their
/// least common multiple, and floats when there is no multiple at all.
fn integer_multiple_numbers(
    f: &Flat,
    types: u8,
    int_ms: &[i64],
) -> Result<Vec<BoxedStrategy<Json>>, GenError> {
    let mut alts = Vec::new();
    let m = int_ms
        .iter()
        .try_fold(1i64, |acc, &m| lcm(acc, m))
        .ok_or_else(|| {
            GenError::new(
                Kind::Unsupported,
                "multipleOf",
                &f.multiple_of[0].1.loc.eval,
                "combines into a multiple larger than 64-bit integers",
            )
        })?;
    if types & INT != 0 {
        if let Some(s) = int_strategy(f, m) {
            alts.push(s);
        }
    }
    if types & FLOAT != 0 && int_ms.is_empty() {
        if let Some(s) = float_strategy(f) {
            alts.push(s);
        }
    }
    Ok(alts)
}

/// For a fraction `m` = a·10^-d (as its shortest decimal form spells it),
/// the least positive integer that is a multiple of it: a / gcd(a, 10^d).
fn integer_step(m: f64) -> Option<i64> {
    let text = format!("{m:e}");
    let (mantissa, exp) = text.split_once('e')?;
    let exp: i64 = exp.parse().ok()?;
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut a: i64 = format!("{int}{frac}").parse().ok()?;
    let d = frac.len() as i64 - exp;
    if a <= 0 || d <= 0 {
        return None;
    }
    for p in [2, 5] {
        let mut left = d;
        while left > 0 && a % p == 0 {
            a /= p;
            left -= 1;
        }
    }
    Some(a)
}

fn lcm_all(step: i64, others: &[i64]) -> Option<i64> {
    others.iter().try_fold(step, |acc, &m| lcm(acc, m))
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: i64, b: i64) -> Option<i64> {
    (a / gcd(a, b)).checked_mul(b)
}

/// Integers in the bounds, multiples of `m`.
fn int_strategy(f: &Flat, m: i64) -> Option<BoxedStrategy<Json>> {
    const LIM: f64 = 9.2e18;
    let lo = f.min.as_ref().map_or(i64::MIN as f64, |b| {
        if b.excl {
            b.v.floor() + 1.0
        } else {
            b.v.ceil()
        }
    });
    let hi = f.max.as_ref().map_or(i64::MAX as f64, |b| {
        if b.excl {
            b.v.ceil() - 1.0
        } else {
            b.v.floor()
        }
    });
    if lo > hi || lo > LIM || hi < -LIM {
        return None;
    }
    let (lo, hi) = (lo.max(-LIM) as i64, hi.min(LIM) as i64);
    let klo = lo.div_euclid(m) + i64::from(lo.rem_euclid(m) != 0);
    let khi = hi.div_euclid(m);
    if klo > khi {
        return None;
    }
    let to_json = move |k: i64| Json::from(k * m);
    let full = (klo..=khi).prop_map(to_json).boxed();
    if khi.saturating_sub(klo) <= 2 * SMALL_WINDOW {
        return Some(full);
    }
    // Small values near zero (or the bound nearest it) first, so that
    // shrinking and most draws stay readable; the full range as often.
    let (wlo, whi) = if klo > 0 {
        (klo, klo + SMALL_WINDOW)
    } else if khi < 0 {
        (khi - SMALL_WINDOW, khi)
    } else {
        ((-SMALL_WINDOW).max(klo), SMALL_WINDOW.min(khi))
    };
    Some(Union::new(vec![(wlo..=whi).prop_map(to_json).boxed(), full]).boxed())
}

fn float_strategy(f: &Flat) -> Option<BoxedStrategy<Json>> {
    let lo = f
        .min
        .as_ref()
        .map(|b| if b.excl { b.v.next_up() } else { b.v });
    let hi = f
        .max
        .as_ref()
        .map(|b| if b.excl { b.v.next_down() } else { b.v });
    let (lo, hi) = match (lo, hi) {
        (Some(l), Some(h)) => (l, h),
        (Some(l), None) => (l, l + FLOAT_SPAN),
        (None, Some(h)) => (h - FLOAT_SPAN, h),
        (None, None) => (-FLOAT_SPAN, FLOAT_SPAN),
    };
    // NaN bounds compare false both ways: refused here too.
    if lo
        .partial_cmp(&hi)
        .is_none_or(|o| o == std::cmp::Ordering::Greater)
        || !lo.is_finite()
        || !hi.is_finite()
    {
        return None;
    }
    if lo == hi {
        return Some(Just(Json::from(lo)).boxed());
    }
    Some((lo..=hi).prop_map(Json::from).boxed())
}

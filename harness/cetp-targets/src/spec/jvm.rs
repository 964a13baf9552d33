//! `jvm:…`: the JVM device (`scripts/jvm-device.sh`), started by the
//! harness for the run with both identities on loopback ports of its own.
//!
//! ```text
//! jvm:sample[,defect=NAME]           the built-in Java sample (examples/java-provider)
//! jvm:APP.apk[,JAR…][,OPTION,...]    a vendor's APK (its code and manifest)
//! jvm:JAR[,JAR…][,OPTION,...]        a vendor's compiled code: jars or class directories
//!     class=CLASS authority=AUTH package=PKG permission=PERM manifest=FILE
//!     meta=KEY=VALUE provider_meta=KEY=VALUE   (repeatable) discovery / provider meta-data
//!     classpath=CP                   (repeatable, ':'-separated) the code's dependencies
//! any jvm:
//!     consumer_jar=JAR               (repeatable) a vendor's Consumer under test: its code
//!     consumer_apk=APP.apk           or its app's APK (its dex read back into class files)
//!     consumer_class=CLASS           its ConsumerAdapter (with consumer_jar=; for `cetp consumer`)
//!     consumer_package=PKG           its package (default: the class's)
//!     jvm_prop=KEY=VALUE             (repeatable) a system property for the Provider's code
//!     build=auto|yes|no              build the device first: when never built / always / never [auto]
//!     ready_timeout_ms=N             how long the device may take to say "ready" [300000]
//! ```
//!
//! Each item is a flag of the script (`class=` is `--provider-class`,
//! `jvm_prop=` is `--jvm-prop`, ...). Paths are relative to the current
//! directory and made absolute here, so the canonical text names the same
//! files from anywhere; each must exist. `,` always separates items, so a
//! path holding one cannot be named (link it under a name without one), nor
//! can a code path holding `=`; a file named `sample` is `./sample`.

use super::{Options, SpecError};
use std::path::{Path, PathBuf};

/// `ready_timeout_ms=`: the device's own checks, an APK's conversion and
/// Robolectric's start on a loaded machine. Once built, the device is
/// normally ready in 3 to 10 s.
pub const DEFAULT_READY_TIMEOUT_MS: u64 = 300_000;

/// `jvm:…`: what the JVM device hosts and how it is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JvmSpec {
    /// The Provider: the built-in sample, or a vendor's code.
    pub code: JvmCode,
    /// `class=` (`--provider-class`).
    pub class: Option<String>,
    /// `authority=` (`--authority`).
    pub authority: Option<String>,
    /// `package=` (`--package`).
    pub package: Option<String>,
    /// `permission=` (`--permission`).
    pub permission: Option<String>,
    /// `manifest=` (`--manifest`), absolute.
    pub manifest: Option<PathBuf>,
    /// `meta=KEY=VALUE` (`--meta`), in order.
    pub meta: Vec<String>,
    /// `provider_meta=KEY=VALUE` (`--provider-meta`), in order.
    pub provider_meta: Vec<String>,
    /// `classpath=` (`--classpath`): each entry, absolute, in order.
    pub classpath: Vec<PathBuf>,
    /// `jvm_prop=KEY=VALUE` (`--jvm-prop`), in order.
    pub jvm_props: Vec<String>,
    /// `consumer_*=`: a Consumer under test beside the Provider (boxed:
    /// most targets have none).
    pub consumer: Option<Box<JvmConsumer>>,
    /// `build=`: whether to build the device before starting it.
    pub build: JvmBuild,
    /// `ready_timeout_ms=`: how long to wait for the device's "ready".
    pub ready_timeout_ms: u64,
    /// `timeout_ms=`: the per-op timeout.
    pub op_timeout_ms: u64,
}

/// A vendor's Consumer under test on the JVM device (`cetp consumer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JvmConsumer {
    /// `consumer_jar=` (`--consumer-jar`): its code, absolute, in order.
    pub jars: Vec<PathBuf>,
    /// `consumer_apk=` (`--consumer-apk`): its app's APK, absolute.
    pub apk: Option<PathBuf>,
    /// `consumer_class=` (`--consumer-class`): its adapter.
    pub class: String,
    /// `consumer_package=` (`--consumer-package`).
    pub package: Option<String>,
}

/// The Provider the JVM device hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JvmCode {
    /// `jvm:sample`: examples/java-provider, `defect=` seeding one of its
    /// defects (`scripts/jvm-device.sh --list-defects`).
    Sample {
        /// `defect=` (`--defect`).
        defect: Option<String>,
    },
    /// `jvm:APP.apk` and/or `jvm:JAR,…`: a vendor's code, absolute paths.
    Vendor {
        /// The item ending in `.apk` (`--provider-apk`).
        apk: Option<PathBuf>,
        /// The other items (`--provider-jar`), in order.
        jars: Vec<PathBuf>,
    },
}

/// `build=`: building is the script's own step (`--build-only`), run
/// before the device starts and bounded on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JvmBuild {
    /// Build when the device was never built, else use the last build.
    Auto,
    /// Build every time (after a change to the probe app or the sample).
    Always,
    /// Never build (`--no-build`): the device must have been built.
    Never,
}

impl JvmSpec {
    /// The script's flags for this spec, from `--defect` on (without
    /// `--listen`, `--listen-b` and `--no-build`, which the opener adds).
    pub fn script_args(&self) -> Vec<String> {
        let mut args: Vec<String> = Vec::new();
        let mut flag = |f: &str, v: String| {
            args.push(f.to_string());
            args.push(v);
        };
        match &self.code {
            JvmCode::Sample { defect } => {
                if let Some(d) = defect {
                    flag("--defect", d.clone());
                }
            }
            JvmCode::Vendor { apk, jars } => {
                for j in jars {
                    flag("--provider-jar", j.display().to_string());
                }
                if let Some(a) = apk {
                    flag("--provider-apk", a.display().to_string());
                }
            }
        }
        let text = |p: &PathBuf| p.display().to_string();
        for (f, v) in [
            ("--provider-class", self.class.clone()),
            ("--authority", self.authority.clone()),
            ("--package", self.package.clone()),
            ("--permission", self.permission.clone()),
            ("--manifest", self.manifest.as_ref().map(text)),
        ] {
            if let Some(v) = v {
                flag(f, v);
            }
        }
        for (f, vs) in [
            ("--meta", &self.meta),
            ("--provider-meta", &self.provider_meta),
            ("--jvm-prop", &self.jvm_props),
        ] {
            for v in vs {
                flag(f, v.clone());
            }
        }
        for c in &self.classpath {
            flag("--classpath", text(c));
        }
        if let Some(c) = &self.consumer {
            for j in &c.jars {
                flag("--consumer-jar", text(j));
            }
            if let Some(a) = &c.apk {
                flag("--consumer-apk", text(a));
            }
            flag("--consumer-class", c.class.clone());
            if let Some(p) = &c.package {
                flag("--consumer-package", p.clone());
            }
        }
        args
    }

    /// The canonical text's head (`jvm:sample`, `jvm:APK,JAR…`), its
    /// options pushed to `opts` in their canonical order.
    pub(super) fn head(&self, opts: &mut Vec<String>) -> String {
        let head = match &self.code {
            JvmCode::Sample { defect } => {
                if let Some(d) = defect {
                    opts.push(format!("defect={d}"));
                }
                "jvm:sample".to_string()
            }
            JvmCode::Vendor { apk, jars } => {
                let items: Vec<String> = apk
                    .iter()
                    .chain(jars)
                    .map(|p| p.display().to_string())
                    .collect();
                format!("jvm:{}", items.join(","))
            }
        };
        for (k, v) in [
            ("class", &self.class),
            ("authority", &self.authority),
            ("package", &self.package),
            ("permission", &self.permission),
        ] {
            if let Some(v) = v {
                opts.push(format!("{k}={v}"));
            }
        }
        if let Some(m) = &self.manifest {
            opts.push(format!("manifest={}", m.display()));
        }
        for (k, vs) in [("meta", &self.meta), ("provider_meta", &self.provider_meta)] {
            opts.extend(vs.iter().map(|v| format!("{k}={v}")));
        }
        if !self.classpath.is_empty() {
            let cp: Vec<String> = self
                .classpath
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            opts.push(format!("classpath={}", cp.join(":")));
        }
        opts.extend(self.jvm_props.iter().map(|v| format!("jvm_prop={v}")));
        if let Some(c) = &self.consumer {
            opts.extend(
                c.jars
                    .iter()
                    .map(|p| format!("consumer_jar={}", p.display())),
            );
            if let Some(a) = &c.apk {
                opts.push(format!("consumer_apk={}", a.display()));
            }
            opts.push(format!("consumer_class={}", c.class));
            if let Some(p) = &c.package {
                opts.push(format!("consumer_package={p}"));
            }
        }
        match self.build {
            JvmBuild::Auto => {}
            JvmBuild::Always => opts.push("build=yes".into()),
            JvmBuild::Never => opts.push("build=no".into()),
        }
        if self.ready_timeout_ms != DEFAULT_READY_TIMEOUT_MS {
            opts.push(format!("ready_timeout_ms={}", self.ready_timeout_ms));
        }
        head
    }
}

/// An existing file or directory, made absolute (relative to the current
/// directory).
fn existing(o: &Options, what: &str, p: &str) -> Result<PathBuf, SpecError> {
    let abs = std::path::absolute(Path::new(p)).map_err(|e| o.err(format!("{what}{p:?}: {e}")))?;
    if !abs.exists() {
        return Err(o.err(format!(
            "{what}no such file or directory: {} (paths are relative to the current directory; ',' separates items, so a path cannot hold one)",
            abs.display()
        )));
    }
    Ok(abs)
}

/// `jvm:sample|APP.apk|JAR…[,OPTIONS]`: the Provider's code and the
/// script's other flags, each checked as the script would before it
/// starts anything.
pub(super) fn parse_jvm(
    o: &mut Options,
    positionals: Vec<String>,
    op_timeout_ms: u64,
) -> Result<JvmSpec, SpecError> {
    let defect = o.take("defect")?;
    let code = jvm_code(o, positionals, defect)?;
    let mut s = JvmSpec {
        code,
        class: o.take("class")?,
        authority: o.take("authority")?,
        package: o.take("package")?,
        permission: o.take("permission")?,
        manifest: None,
        meta: o.take_all("meta"),
        provider_meta: o.take_all("provider_meta"),
        classpath: Vec::new(),
        jvm_props: o.take_all("jvm_prop"),
        consumer: None,
        build: JvmBuild::Auto,
        ready_timeout_ms: o
            .number("ready_timeout_ms")?
            .unwrap_or(DEFAULT_READY_TIMEOUT_MS),
        op_timeout_ms,
    };
    if let Some(m) = o.take("manifest")? {
        s.manifest = Some(existing(o, "manifest=", &m)?);
    }
    for cp in o.take_all("classpath") {
        for e in cp.split(':').filter(|e| !e.is_empty()) {
            s.classpath.push(existing(o, "classpath=", e)?);
        }
    }
    s.consumer = jvm_consumer(o)?;
    if let Some(v) = o.take("build")? {
        s.build = match v.as_str() {
            "auto" => JvmBuild::Auto,
            "yes" | "1" | "always" => JvmBuild::Always,
            "no" | "0" | "never" => JvmBuild::Never,
            _ => return Err(o.err(format!("build={v:?}: use auto, yes or no"))),
        };
    }
    if s.ready_timeout_ms == 0 {
        return Err(o.err("ready_timeout_ms=0: the device needs time to start".into()));
    }
    check_jvm(o, &s)?;
    Ok(s)
}

/// The items without `=`: `sample`, or the vendor's APK and jars.
fn jvm_code(
    o: &Options,
    positionals: Vec<String>,
    defect: Option<String>,
) -> Result<JvmCode, SpecError> {
    if positionals.is_empty() {
        return Err(o.err(
            "jvm needs its Provider: jvm:sample (the built-in Java sample), jvm:APP.apk or jvm:JAR[,JAR…]"
                .into(),
        ));
    }
    if positionals == ["sample"] {
        return Ok(JvmCode::Sample { defect });
    }
    if defect.is_some() {
        return Err(o.err(
            "defect= seeds a defect in the built-in sample (jvm:sample); it does not apply to a vendor's code"
                .into(),
        ));
    }
    let mut apk = None;
    let mut jars = Vec::new();
    for p in &positionals {
        if p == "sample" {
            return Err(o.err(
                "jvm:sample is the built-in sample alone (a file named sample is ./sample)".into(),
            ));
        }
        let path = existing(o, "", p)?;
        if p.to_ascii_lowercase().ends_with(".apk") {
            if apk.is_some() {
                return Err(o.err("one APK per jvm target".into()));
            }
            apk = Some(path);
        } else {
            jars.push(path);
        }
    }
    Ok(JvmCode::Vendor { apk, jars })
}

/// `consumer_jar=`, `consumer_apk=`, `consumer_class=`, `consumer_package=`:
/// none, or a Consumer under test with its code and its adapter (the
/// script needs both), each file existing, the class a class name.
fn jvm_consumer(o: &mut Options) -> Result<Option<Box<JvmConsumer>>, SpecError> {
    let mut jars = Vec::new();
    for j in o.take_all("consumer_jar") {
        jars.push(existing(o, "consumer_jar=", &j)?);
    }
    let apk = match o.take("consumer_apk")? {
        Some(a) => Some(existing(o, "consumer_apk=", &a)?),
        None => None,
    };
    let class = o.take("consumer_class")?;
    let package = o.take("consumer_package")?;
    let has_code = !jars.is_empty() || apk.is_some();
    if !has_code && class.is_none() && package.is_none() {
        return Ok(None);
    }
    let (true, Some(class)) = (has_code, class) else {
        return Err(o.err(
            "a Consumer under test needs both its code (consumer_jar=JAR or consumer_apk=APP.apk) and consumer_class=CLASS (its adapter)"
                .into(),
        ));
    };
    let good = class.starts_with(|ch: char| ch.is_ascii_alphabetic() || ch == '_' || ch == '$')
        && class
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "_$.".contains(ch));
    if !good {
        return Err(o.err(format!("consumer_class={class:?} is not a class name")));
    }
    Ok(Some(Box::new(JvmConsumer {
        jars,
        apk,
        class,
        package,
    })))
}

/// What the script refuses before starting (exit 2), refused here first as
/// a usage error.
fn check_jvm(o: &Options, s: &JvmSpec) -> Result<(), SpecError> {
    match &s.code {
        JvmCode::Sample { .. } => {
            let vendor_only = [
                ("class=", s.class.is_some()),
                ("authority=", s.authority.is_some()),
                ("package=", s.package.is_some()),
                ("permission=", s.permission.is_some()),
                ("manifest=", s.manifest.is_some()),
                ("meta=", !s.meta.is_empty()),
                ("provider_meta=", !s.provider_meta.is_empty()),
                ("classpath=", !s.classpath.is_empty()),
            ];
            if let Some((k, _)) = vendor_only.iter().find(|(_, given)| *given) {
                return Err(o.err(format!(
                    "{k} describes a vendor's code (jvm:APP.apk or jvm:JAR); jvm:sample is the built-in sample"
                )));
            }
        }
        JvmCode::Vendor { apk, .. } => {
            if apk.is_none() && s.manifest.is_none() && (s.class.is_none() || s.authority.is_none())
            {
                return Err(o.err(
                    "give manifest=FILE, or class=CLASS and authority=AUTH (an APK brings its manifest)"
                        .into(),
                ));
            }
        }
    }
    for (k, kv) in s
        .meta
        .iter()
        .map(|kv| ("meta", kv))
        .chain(s.provider_meta.iter().map(|kv| ("provider_meta", kv)))
    {
        if kv.split_once('=').is_none_or(|(k, _)| k.is_empty()) {
            return Err(o.err(format!("{k}={kv:?} is not KEY=VALUE")));
        }
    }
    for kv in &s.jvm_props {
        let key = kv.split_once('=').map(|(k, _)| k).unwrap_or("");
        let good = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !good {
            return Err(o.err(format!("jvm_prop={kv:?} is not KEY=VALUE")));
        }
        if key.starts_with("cetp.jvm.") {
            return Err(o.err(format!(
                "jvm_prop={kv:?}: cetp.jvm.* properties are the device's own"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::TargetSpec;
    use super::*;

    fn parse(text: &str) -> JvmSpec {
        match TargetSpec::parse(text) {
            Ok(TargetSpec::Jvm(s)) => {
                let again = TargetSpec::parse(&TargetSpec::Jvm(s.clone()).to_string())
                    .unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(again, TargetSpec::Jvm(s.clone()), "{text}");
                s
            }
            other => panic!("{text}: {other:?}"),
        }
    }

    fn refused(text: &str, why: &str) {
        let e = TargetSpec::parse(text).unwrap_err();
        assert!(e.reason.contains(why), "{text}: {e}");
    }

    /// A scratch directory with an APK, jars and a class directory (empty:
    /// the parser only checks that they exist).
    fn files() -> PathBuf {
        let d = std::env::temp_dir().join(format!("cetp-jvm-spec-{}", std::process::id()));
        std::fs::create_dir_all(d.join("classes")).unwrap();
        for f in ["app.apk", "p.jar", "dep.jar"] {
            std::fs::write(d.join(f), b"").unwrap();
        }
        d
    }

    #[test]
    fn the_sample_with_its_defects_props_and_build() {
        let s = parse("jvm:sample");
        assert_eq!(s.code, JvmCode::Sample { defect: None });
        assert_eq!((s.build, s.ready_timeout_ms), (JvmBuild::Auto, 300_000));
        assert_eq!(TargetSpec::Jvm(s.clone()).to_string(), "jvm:sample");
        assert!(s.script_args().is_empty());
        let s = parse("jvm:sample,defect=no-dedupe,jvm_prop=a.b=1=2,jvm_prop=c=,build=no,ready_timeout_ms=9000,timeout_ms=2000");
        assert_eq!(
            s.code,
            JvmCode::Sample {
                defect: Some("no-dedupe".into())
            }
        );
        assert_eq!(s.jvm_props, ["a.b=1=2", "c="]);
        assert_eq!(
            (s.build, s.ready_timeout_ms, s.op_timeout_ms),
            (JvmBuild::Never, 9000, 2000)
        );
        assert_eq!(
            s.script_args(),
            [
                "--defect",
                "no-dedupe",
                "--jvm-prop",
                "a.b=1=2",
                "--jvm-prop",
                "c="
            ]
        );
        assert_eq!(
            TargetSpec::Jvm(s).to_string(),
            "jvm:sample,defect=no-dedupe,jvm_prop=a.b=1=2,jvm_prop=c=,build=no,ready_timeout_ms=9000,timeout_ms=2000"
        );
        assert_eq!(parse("jvm:sample,build=yes").build, JvmBuild::Always);
        assert_eq!(parse("jvm,sample").code, JvmCode::Sample { defect: None });
    }

    #[test]
    fn a_vendors_code_every_key_made_absolute() {
        let d = files();
        let p = |f: &str| d.join(f);
        let at = |f: &str| p(f).display().to_string();
        // Relative paths (the tests run in the crate's directory) are made
        // absolute; absolute ones are kept.
        let s = parse(&format!("jvm:{},{},src,class=com.x.P,authority=com.x.tools,package=com.x,permission=com.x.P,manifest=Cargo.toml,meta=k=v,meta=k2=2,provider_meta=m=1,classpath={}:src,classpath={},jvm_prop=com.x.defect=y", at("p.jar"), at("app.apk"), at("dep.jar"), at("classes")));
        let here = |f: &str| std::env::current_dir().unwrap().join(f);
        assert_eq!(
            s.code,
            JvmCode::Vendor {
                apk: Some(p("app.apk")),
                jars: vec![p("p.jar"), here("src")]
            }
        );
        assert_eq!(s.manifest, Some(here("Cargo.toml")));
        assert_eq!(s.classpath, [p("dep.jar"), here("src"), p("classes")]);
        assert_eq!((s.meta.len(), s.provider_meta.len()), (2, 1));
        let args = s.script_args();
        let src = here("src").display().to_string();
        for pair in [
            ["--provider-jar", &at("p.jar")],
            ["--provider-jar", &src],
            ["--provider-apk", &at("app.apk")],
            ["--provider-class", "com.x.P"],
            ["--authority", "com.x.tools"],
            ["--package", "com.x"],
            ["--permission", "com.x.P"],
            ["--manifest", &here("Cargo.toml").display().to_string()],
            ["--meta", "k2=2"],
            ["--provider-meta", "m=1"],
            ["--classpath", &at("dep.jar")],
            ["--classpath", &src],
            ["--jvm-prop", "com.x.defect=y"],
        ] {
            assert!(
                args.windows(2).any(|w| w == pair),
                "{pair:?} not in {args:?}"
            );
        }
        // An APK alone brings its manifest; a jar needs one, or class and authority.
        parse(&format!("jvm:{}", p("app.apk").display()));
        parse(&format!(
            "jvm:{},class=a.B,authority=a.b",
            p("p.jar").display()
        ));
        let jar = p("p.jar").display().to_string();
        refused(
            &format!("jvm:{jar}"),
            "give manifest=FILE, or class=CLASS and authority=AUTH",
        );
        refused(&format!("jvm:{jar},class=a.B"), "give manifest=FILE");
        refused(
            &format!("jvm:{jar},class=a.B,authority=a.b,defect=no-dedupe"),
            "built-in sample",
        );
        let apk = p("app.apk").display().to_string();
        refused(&format!("jvm:{apk},{apk}"), "one APK per jvm target");
        refused(&format!("jvm:{apk},meta=novalue"), "is not KEY=VALUE");
        refused(&format!("jvm:{apk},provider_meta==v"), "is not KEY=VALUE");
        refused(
            &format!("jvm:{apk},classpath=/no/such.jar"),
            "no such file or directory: /no/such.jar",
        );
        refused(
            &format!("jvm:{apk},manifest=/no/M.xml"),
            "manifest=no such file",
        );
        refused(
            &format!("jvm:{apk},sample"),
            "jvm:sample is the built-in sample alone",
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        refused("jvm", "jvm needs its Provider");
        refused("jvm:build=no", "jvm needs its Provider");
        // A comma in a path splits it: each half is looked for, and the
        // error says why.
        refused(
            "jvm:/no/such,dir/app.apk",
            "',' separates items, so a path cannot hold one",
        );
        refused("jvm:sample,class=a.B", "class= describes a vendor's code");
        refused(
            "jvm:sample,manifest=/etc/hostname",
            "manifest= describes a vendor's code",
        );
        refused(
            "jvm:sample,defect=a,defect=b",
            "defect given more than once",
        );
        refused("jvm:sample,build=maybe", "use auto, yes or no");
        refused("jvm:sample,ready_timeout_ms=0", "needs time to start");
        refused("jvm:sample,ready_timeout_ms=soon", "is not a number");
        refused("jvm:sample,jvm_prop=noequals", "is not KEY=VALUE");
        refused("jvm:sample,jvm_prop=1x=2", "is not KEY=VALUE");
        refused("jvm:sample,jvm_prop=cetp.jvm.listen=x", "the device's own");
        refused("jvm:sample,b=127.0.0.1:1", "unknown option \"b\" for jvm");
    }

    #[test]
    fn a_consumer_under_test_beside_the_provider() {
        let d = files();
        let jar = d.join("p.jar");
        let s = parse(&format!(
            "jvm:sample,consumer_jar={},consumer_class=com.example.cetp.agent.AgentAdapter,consumer_package=com.x",
            jar.display()
        ));
        assert_eq!(
            s.consumer.as_ref().map(|c| c.jars.clone()),
            Some(vec![jar.clone()])
        );
        assert_eq!(
            s.script_args(),
            [
                "--consumer-jar",
                &jar.display().to_string(),
                "--consumer-class",
                "com.example.cetp.agent.AgentAdapter",
                "--consumer-package",
                "com.x",
            ]
        );
        let jar = jar.display();
        refused(
            &format!("jvm:sample,consumer_jar={jar}"),
            "needs both its code",
        );
        refused("jvm:sample,consumer_class=a.B", "needs both its code");
        refused(
            &format!("jvm:sample,consumer_jar={jar},consumer_package=p"),
            "needs both its code",
        );
        refused(
            &format!("jvm:sample,consumer_jar={jar},consumer_class=a;rm"),
            "not a class name",
        );
        refused(
            "jvm:sample,consumer_jar=/no/such.jar,consumer_class=a.B",
            "no such file",
        );
        let apk = d.join("app.apk");
        let s = parse(&format!(
            "jvm:sample,consumer_apk={},consumer_class=a.B",
            apk.display()
        ));
        assert_eq!(
            s.script_args(),
            [
                "--consumer-apk",
                &apk.display().to_string(),
                "--consumer-class",
                "a.B"
            ]
        );
        refused(
            &format!("jvm:sample,consumer_apk={}", apk.display()),
            "needs both its code",
        );
    }
}

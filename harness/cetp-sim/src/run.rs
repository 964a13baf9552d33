//! `cetp sim`: a simulated device on TCP ports until the process is killed.

use crate::{parse_manifest_variant, parse_provider, Sim, SimConfig, SimError};
use cetp_reference::provider::{FixtureSet, ManifestVariant};
use std::net::SocketAddr;
use tokio::net::TcpListener;

/// Options of `cetp sim` (flatten into a clap command with
/// `#[command(flatten)]`, or fill in directly).
#[derive(Clone, Debug, clap::Args)]
pub struct SimOptions {
    /// Probe-wire endpoint of identity a (port 0: any free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Probe-wire endpoint of identity b [default: port of --listen + 1, or
    /// any free port when that is 0].
    #[arg(long, value_name = "ADDR")]
    pub listen_b: Option<String>,
    /// Device-side adb endpoint (`adb connect ADDR`); none if absent.
    #[arg(long, value_name = "ADDR")]
    pub adb_listen: Option<String>,
    /// The app to host: reference or notes.
    #[arg(long, value_name = "APP", default_value = "reference", value_parser = parse_provider_arg)]
    pub provider: FixtureSet,
    /// Host this mutant of that app instead.
    #[arg(long, value_name = "NAME")]
    pub mutant: Option<String>,
    /// Host this legal variant of the reference Provider instead.
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
    /// dual-stack, v2-only, v1-only, versions-only or mismatched-package.
    #[arg(long, value_name = "VARIANT", default_value = "dual-stack", value_parser = parse_manifest_arg)]
    pub manifest: ManifestVariant,
    /// Device clock minus host clock, in milliseconds.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub clock_skew_ms: i64,
    /// Real time a mutation takes in the Provider.
    #[arg(long, value_name = "MS", default_value_t = 30)]
    pub effect_delay_ms: u64,
    /// Seed of the Provider's tokens.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// A tool (or method) the Provider never answers: its calls hang until
    /// the caller stops waiting.
    #[arg(long, value_name = "TOOL")]
    pub hang: Option<String>,
    /// What a host may shape when it hosts a hostile Provider: `open`
    /// (any authority, package, manifest and reply) or `probe-app` (only
    /// what the probe app allows on a phone: its own authority and package,
    /// its declared meta-data sets, its throwable classes, PendingIntents of
    /// its own confirmation activity only, no foreign value in a result).
    #[arg(long, value_name = "RULES", default_value = "open", value_parser = parse_hosting_arg)]
    pub hosting: crate::hosted::Hosting,
    /// A device whose clock the harness cannot move, as a phone's:
    /// `advance_clock` is answered `unknown_op`, so time-bound cases are
    /// judged by waiting in real time.
    #[arg(long)]
    pub fixed_clock: bool,
    /// The Provider's session lifetime (its `expires_at`), instead of the
    /// app's: a debug build with short lifetimes.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(1..))]
    pub session_ttl_ms: Option<i64>,
    /// The Provider's resume-token lifetime, instead of the app's.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(1..))]
    pub resume_token_ttl_ms: Option<i64>,
    /// Who may set the device's wall clock over adb: `none` (a user
    /// build), `adbd` (after `adb root`: an emulator or userdebug build) or
    /// `su` (`su 0 date @SECONDS`).
    #[arg(long, value_name = "WHO", value_enum, default_value = "none")]
    pub root: crate::Root,
    /// The Provider times lifetimes by the elapsed clock
    /// (`elapsedRealtime`): setting the wall clock ages none of them.
    #[arg(long)]
    pub provider_elapsed_clock: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        let cfg = SimConfig::default();
        SimOptions {
            listen: "127.0.0.1:0".into(),
            listen_b: None,
            adb_listen: None,
            provider: cfg.provider,
            mutant: cfg.mutant,
            variant: cfg.variant,
            manifest: cfg.manifest,
            clock_skew_ms: cfg.clock_skew_ms,
            effect_delay_ms: cfg.effect_delay_ms,
            seed: cfg.seed,
            hang: cfg.hang,
            hosting: cfg.hosting,
            fixed_clock: cfg.fixed_clock,
            session_ttl_ms: cfg.session_ttl_ms,
            resume_token_ttl_ms: cfg.resume_token_ttl_ms,
            root: cfg.root,
            provider_elapsed_clock: cfg.provider_elapsed_clock,
        }
    }
}

fn parse_provider_arg(s: &str) -> Result<FixtureSet, String> {
    parse_provider(s).map_err(|e| e.to_string())
}

fn parse_hosting_arg(s: &str) -> Result<crate::hosted::Hosting, String> {
    crate::hosted::Hosting::parse(s)
}

fn parse_manifest_arg(s: &str) -> Result<ManifestVariant, String> {
    parse_manifest_variant(s).map_err(|e| e.to_string())
}

impl SimOptions {
    /// The device these options set up, without its listeners.
    pub fn sim_config(&self) -> SimConfig {
        SimConfig {
            provider: self.provider,
            mutant: self.mutant.clone(),
            variant: self.variant.clone(),
            manifest: self.manifest,
            clock_skew_ms: self.clock_skew_ms,
            effect_delay_ms: self.effect_delay_ms,
            seed: self.seed,
            hang: self.hang.clone(),
            hosting: self.hosting,
            fixed_clock: self.fixed_clock,
            session_ttl_ms: self.session_ttl_ms,
            resume_token_ttl_ms: self.resume_token_ttl_ms,
            root: self.root,
            provider_elapsed_clock: self.provider_elapsed_clock,
        }
    }
}

async fn bind(addr: &str, what: &str) -> Result<TcpListener, SimError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| SimError::Io {
            what: format!("binding {what} to {addr}"),
            source,
        })
}

fn local(l: &TcpListener) -> Result<SocketAddr, SimError> {
    l.local_addr().map_err(|source| SimError::Io {
        what: "reading a listener's address".into(),
        source,
    })
}

/// The default endpoint of identity b: next to a's, or any free port when
/// a's was chosen by the system.
fn default_listen_b(requested_a: &str, bound_a: SocketAddr) -> String {
    let port_zero = requested_a
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.trim() == "0");
    let port = if port_zero {
        0
    } else {
        bound_a.port().checked_add(1).unwrap_or(0)
    };
    SocketAddr::new(bound_a.ip(), port).to_string()
}

/// Runs a simulated device until the process is killed. Prints one line per
/// listener on stdout, so a script binding port 0 can read the ports:
///
/// ```text
/// listening identity=a addr=127.0.0.1:40123
/// listening identity=b addr=127.0.0.1:40124
/// listening adb addr=127.0.0.1:40125
/// ```
///
/// Returns only on a setup error (unknown mutant, address in use) or when
/// a listener becomes unusable.
pub async fn run_sim(opts: SimOptions) -> Result<(), SimError> {
    let sim = Sim::new(opts.sim_config())?;
    let a = bind(&opts.listen, "identity a").await?;
    let a_addr = local(&a)?;
    let b_requested = opts
        .listen_b
        .clone()
        .unwrap_or_else(|| default_listen_b(&opts.listen, a_addr));
    let b = bind(&b_requested, "identity b").await?;
    let b_addr = local(&b)?;
    let adb = match &opts.adb_listen {
        Some(addr) => Some(bind(addr, "the adb endpoint").await?),
        None => None,
    };
    println!("listening identity=a addr={a_addr}");
    println!("listening identity=b addr={b_addr}");
    let adb_addr = adb.as_ref().map(local).transpose()?;
    if let Some(addr) = adb_addr {
        println!("listening adb addr={addr}");
    }
    eprintln!(
        "cetp-sim: provider={} mutant={} manifest={} clock_skew_ms={} effect_delay_ms={} variant={} fixed_clock={}",
        sim.provider().config().package,
        opts.mutant.as_deref().unwrap_or("none"),
        crate::manifest_variant_name(opts.manifest),
        opts.clock_skew_ms,
        opts.effect_delay_ms,
        opts.variant.as_deref().unwrap_or("none"),
        opts.fixed_clock
    );
    let io = |what: &str| {
        let what = what.to_string();
        move |source| SimError::Io { what, source }
    };
    let serve_a = {
        let sim = sim.clone();
        async move {
            sim.serve_tcp("a", a)
                .await
                .map_err(io("serving identity a"))
        }
    };
    let serve_b = {
        let sim = sim.clone();
        async move {
            sim.serve_tcp("b", b)
                .await
                .map_err(io("serving identity b"))
        }
    };
    let serve_adb = async move {
        match adb {
            Some(listener) => cetp_adbd::serve(
                listener,
                sim.adb_services(),
                cetp_adbd::AdbdConfig::default(),
            )
            .await
            .map_err(io("serving adb")),
            None => std::future::pending().await,
        }
    };
    tokio::try_join!(serve_a, serve_b, serve_adb).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimOptions,
    }

    #[test]
    fn options_parse() {
        let cli = Cli::try_parse_from([
            "sim",
            "--listen",
            "127.0.0.1:7100",
            "--manifest",
            "v2-only",
            "--clock-skew-ms",
            "-5000",
            "--mutant",
            "no_dedupe",
        ])
        .unwrap();
        assert_eq!(cli.sim.listen, "127.0.0.1:7100");
        assert_eq!(cli.sim.manifest, ManifestVariant::V2Only);
        assert_eq!(cli.sim.clock_skew_ms, -5000);
        assert_eq!(cli.sim.effect_delay_ms, 30);
        assert_eq!(cli.sim.sim_config().mutant.as_deref(), Some("no_dedupe"));
        let bad = Cli::try_parse_from(["sim", "--manifest", "v9"]);
        assert!(bad.is_err());
        let d = Cli::try_parse_from(["sim"]).unwrap().sim;
        assert_eq!(d.listen, SimOptions::default().listen);
        assert_eq!(d.manifest, ManifestVariant::DualStack);
        assert_eq!(d.provider, FixtureSet::Reference);
        let notes = Cli::try_parse_from(["sim", "--provider", "notes"]).unwrap();
        assert_eq!(notes.sim.sim_config().provider, FixtureSet::Notes);
        let Err(e) = Cli::try_parse_from(["sim", "--provider", "todo"]) else {
            panic!("an unknown provider parsed")
        };
        assert!(e.to_string().contains("reference, notes"), "{e}");
    }

    #[test]
    fn listen_b_defaults_next_to_a() {
        let a: SocketAddr = "127.0.0.1:7100".parse().unwrap();
        assert_eq!(default_listen_b("127.0.0.1:7100", a), "127.0.0.1:7101");
        let any: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        assert_eq!(default_listen_b("127.0.0.1:0", any), "127.0.0.1:0");
        let top: SocketAddr = "127.0.0.1:65535".parse().unwrap();
        assert_eq!(default_listen_b("127.0.0.1:65535", top), "127.0.0.1:0");
    }

    #[tokio::test]
    async fn unknown_mutant_fails_before_binding() {
        let e = run_sim(SimOptions {
            mutant: Some("nope".into()),
            ..SimOptions::default()
        })
        .await
        .unwrap_err();
        assert!(matches!(e, SimError::UnknownMutant { .. }), "{e}");
    }
}

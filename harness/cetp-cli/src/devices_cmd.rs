//! `cetp run --devices`: how a run of several `--target`s spreads its
//! cases. The run itself is [`cetp_commands::devices`]'.

/// How a run spreads its cases over several devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Shard,
    Matrix,
}

impl Mode {
    /// The library's mode.
    pub fn mode(self) -> cetp_commands::options::Mode {
        match self {
            Mode::Shard => cetp_commands::options::Mode::Shard,
            Mode::Matrix => cetp_commands::options::Mode::Matrix,
        }
    }
}

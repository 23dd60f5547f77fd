//! The `repowire-operator` binary: `run` or `crdgen`.

use clap::Parser;
use repowire_operator::config::{Cli, Command};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crdgen => {
            print!("{}", repowire_operator::crd::crds_yaml()?);
            Ok(())
        }
        Command::Run(config) => {
            repowire_operator::run::init_tracing(config.log_format);
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(repowire_operator::run::run(*config))
        }
    }
}

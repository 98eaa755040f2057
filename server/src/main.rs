//! The `freshet` binary.

use clap::Parser;
use freshet_server::Config;
use tracing_subscriber::EnvFilter;

/// mimalloc, not glibc's malloc: with many connection tasks and the
/// commit thread allocating and freeing small buffers on every statement,
/// glibc's arenas spent a quarter of the server's CPU in `malloc`,
/// `free` and `malloc_consolidate` (perf, 32 clients updating by key).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let config = Config::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_new(&config.log_filter).unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    // A panic ends only the task it happens in (a connection's is closed
    // with XX000); log it once, through tracing, where it happened. No
    // backtrace: a client can reach some panics (pgwire's decoder), and
    // symbolizing the first backtrace loads the binary's debug info for
    // good (~300 MiB of RSS seen), which a client must not be able to cost.
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        tracing::error!(
            thread = thread.name().unwrap_or("?"),
            location = %info.location().map(|l| l.to_string()).unwrap_or_default(),
            message = freshet_server::error::panic_message(info.payload()),
            "panic"
        );
    }));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(freshet_server::config::STATEMENT_STACK_BYTES)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(freshet_server::serve(config)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "freshet stopped");
            std::process::ExitCode::FAILURE
        }
    }
}

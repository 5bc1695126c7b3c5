//! The `basalt-bench` binary; everything lives in the library.

fn main() -> std::process::ExitCode {
    basalt_bench::cli::main()
}

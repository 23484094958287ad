//! Prints the program the seeded tests generate for a seed, with its
//! arguments, so a failing seed can be run by hand:
//! `cargo run -p irad-fuzzgen --example show -- SEED [smooth]`, then
//! `irad run /tmp/p.irad -f main --args '...'`.

use arbitrary::Unstructured;
use irad_fuzzgen::generate::{Config, program};

fn main() {
    let mut argv = std::env::args().skip(1);
    let seed: u64 = argv.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let smooth = argv.next().as_deref() == Some("smooth");
    let bytes = irad_fuzzgen::seeded(seed, 4096);
    let mut u = Unstructured::new(&bytes);
    let cfg = Config {
        smooth,
        ..Config::default()
    };
    match program(&mut u, &cfg) {
        Ok(p) => {
            println!("{}", p.source);
            println!("// features: {}", p.features.join(", "));
            println!("// args: {}", p.args);
        }
        Err(e) => eprintln!("no program: {e}"),
    }
}

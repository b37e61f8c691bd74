//! Single-threaded time per step of a mass-interaction chain, per module, for a few
//! model sizes: a quick look at what the `compute` probe measures properly.
//!
//! `cargo run --release -p ictus-core --example mass_step [MODULES...]`
#![allow(clippy::print_stdout)] // an example reports on stdout

use std::time::Instant;

use ictus_core::mass::{Model, Params};

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("MODULES must be a whole number"))
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 1_000_000]
    } else {
        sizes
    };
    println!(
        "{:>10} {:>8} {:>14} {:>16}",
        "modules", "steps", "ns_per_step", "ns_per_module"
    );
    for modules in sizes {
        // A chain of n masses has 2n + 1 modules.
        let mut model = Model::chain(modules.saturating_sub(1) / 2, &Params::default())
            .expect("default parameters are valid");
        model.set_state(model.n_points() / 3, 1e-3, 1e-3);
        // About 2e8 module-steps per size, at least 10 steps; warm-up of a tenth.
        let steps = (200_000_000 / model.n_modules().max(1)).max(10);
        for _ in 0..steps / 10 {
            model.step();
        }
        let start = Instant::now();
        for _ in 0..steps {
            model.step();
        }
        let ns = start.elapsed().as_nanos() as f64;
        let per_step = ns / steps as f64;
        println!(
            "{:>10} {:>8} {:>14.1} {:>16.3}",
            model.n_modules(),
            steps,
            per_step,
            per_step / model.n_modules() as f64
        );
        // Keep the result alive so the work is not optimised away.
        std::hint::black_box(model.position(1));
    }
}

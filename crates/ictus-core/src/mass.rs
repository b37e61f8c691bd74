//! A CORDIS-ANIMA style mass-interaction model: the workload of the `compute` and
//! `loop` probes.
//!
//! The model is made of modules, as in CORDIS-ANIMA (Cadoz, Luciani and Florens,
//! 1993): *masses* (`MAS`), *fixed points* (`SOL`) and *links* (`REF`, a spring and
//! a damper between two points). Positions are scalar (1-D, as in the haptic and
//! sound models), `f64`, and measured as displacements from rest. One step is two
//! phases:
//!
//! 1. **forces**: each link reads the positions of its two points and writes its
//!    force into its own slot, in the discrete form
//!    `F = K (x_b - x_a) + (Z / dt) ((x_b - x'_b) - (x_a - x'_a))`
//!    (`x'` is the previous position); `+F` acts on `a`, `-F` on `b`;
//! 2. **integration**: each mass sums the forces of its links, always in the same
//!    order, and moves by the explicit scheme of the papers,
//!    `x[n+1] = 2 x[n] - x[n-1] + F dt^2 / m`; fixed points stay where they are.
//!
//! The state is a structure of arrays, allocated when the model is built; a step
//! never allocates. To split a step across `K` threads, [`Model::partition`] gives
//! each thread a contiguous block of points and the links that start in it. Each
//! thread runs [`Model::forces`] on its [`Part`], meets the others at a rendezvous,
//! runs [`Model::integrate`], and meets them again: the two rendezvous of the fully
//! synchronous loop, one for the forces and one for the positions. A position is
//! written only by the thread that owns its point, and only in the integration
//! phase; a link force only by the thread that owns its link, and only in the force
//! phase; so the threads never race, and the result is bit for bit the one of the
//! single-threaded [`Model::step`], whatever `K`.
//!
//! The arrays that cross threads hold `f64` bits in `AtomicU64`s accessed with
//! relaxed loads and stores (plain moves on x86-64 and AArch64): the rendezvous
//! orders them, and the crate stays free of `unsafe`.
//!
//! ```
//! use ictus_core::mass::{Model, Params};
//! // A string of 100 masses between two fixed ends: 100 masses + 101 links.
//! let mut sut = Model::chain(100, &Params::default()).unwrap();
//! assert_eq!(sut.n_modules(), 201);
//! sut.set_state(50, 1e-3, 1e-3); // pluck the middle mass, at rest
//! let before = sut.energy();
//! for _ in 0..1_000 {
//!     sut.step();
//! }
//! assert!(sut.energy() < before); // the default damping dissipates
//! assert!(sut.position(50).abs() < 1e-3);
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "f64 bits shared by the phases of a parallel step, ordered by the step's barrier (SpinBarrier, loom-checked), not by these words"
)]

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use thiserror::Error;

use crate::time::Nanos;

/// Physical parameters shared by every module of a [`Model::chain`] or
/// [`Model::mesh`].
///
/// The explicit scheme is stable when `dt < sqrt(m / K_eff)`, with `K_eff` the sum of
/// the stiffnesses on a mass times two (`4 K` inside a chain, `8 K` inside a mesh).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// Mass of each `MAS`, in kilograms.
    pub mass: f64,
    /// Stiffness `K` of each link, in newtons per metre.
    pub stiffness: f64,
    /// Damping `Z` of each link, in newton-seconds per metre.
    pub damping: f64,
    /// The simulation step.
    pub dt: Nanos,
}

impl Default for Params {
    /// 1 g masses, 1 kN/m springs, 10 mN·s/m dampers, stepped at 10 kHz: stable with
    /// a wide margin (`dt sqrt(8 K / m)` is 0.28 inside a mesh, below 2).
    fn default() -> Self {
        Params {
            mass: 1e-3,
            stiffness: 1e3,
            damping: 1e-2,
            dt: Nanos::from_micros(100),
        }
    }
}

/// Why a model cannot be built.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ModelError {
    /// A step of zero never moves anything.
    #[error("the step dt must be greater than zero")]
    ZeroStep,
    /// A mass must be positive and finite, and `dt^2 / m` representable.
    #[error("point {point}: mass {mass} kg is not usable (must be positive and finite)")]
    BadMass {
        /// The point.
        point: usize,
        /// Its mass, in kilograms.
        mass: f64,
    },
    /// An initial position that is not finite.
    #[error("point {point}: position {position} is not finite")]
    BadPosition {
        /// The point.
        point: usize,
        /// Its position.
        position: f64,
    },
    /// Stiffness or damping negative or not finite.
    #[error("link {link}: stiffness {stiffness} and damping {damping} must be finite and >= 0")]
    BadLink {
        /// The link, in the order it was added.
        link: usize,
        /// Its stiffness, in newtons per metre.
        stiffness: f64,
        /// Its damping, in newton-seconds per metre.
        damping: f64,
    },
    /// A link to a point that does not exist.
    #[error("link {link}: point {point} does not exist (the model has {points})")]
    UnknownPoint {
        /// The link, in the order it was added.
        link: usize,
        /// The missing point.
        point: usize,
        /// How many points the model has.
        points: usize,
    },
    /// A link from a point to itself.
    #[error("link {link}: both ends are point {point}")]
    SelfLink {
        /// The link, in the order it was added.
        link: usize,
        /// The point.
        point: usize,
    },
    /// More points or links than 32-bit indices can address.
    #[error("{points} points and {links} links exceed the 32-bit indices of the model")]
    TooLarge {
        /// Points asked for.
        points: usize,
        /// Links asked for.
        links: usize,
    },
}

/// Builds a [`Model`] module by module; [`Model::chain`] and [`Model::mesh`] use it.
///
/// Points are numbered in the order they are added. Links may be added in any
/// order: the model stores them sorted by their lower point, so that a
/// [`Part`] of contiguous points owns a contiguous range of links.
#[derive(Clone, Debug)]
pub struct ModelBuilder {
    dt: Nanos,
    /// `None` for a fixed point.
    mass: Vec<Option<f64>>,
    position: Vec<f64>,
    links: Vec<(usize, usize, f64, f64)>,
}

impl ModelBuilder {
    /// An empty model stepped every `dt`.
    pub fn new(dt: Nanos) -> Self {
        ModelBuilder {
            dt,
            mass: Vec::new(),
            position: Vec::new(),
            links: Vec::new(),
        }
    }

    /// Adds a `MAS` of `mass` kilograms at rest at `position`; returns its point index.
    pub fn mass(&mut self, mass: f64, position: f64) -> usize {
        self.mass.push(Some(mass));
        self.position.push(position);
        self.mass.len() - 1
    }

    /// Adds a `SOL`, a fixed point at `position`; returns its point index.
    pub fn fixed(&mut self, position: f64) -> usize {
        self.mass.push(None);
        self.position.push(position);
        self.mass.len() - 1
    }

    /// Adds a `REF` between points `a` and `b`: a spring of `stiffness` newtons per
    /// metre and a damper of `damping` newton-seconds per metre, at rest when both
    /// points are at the same position.
    pub fn link(&mut self, a: usize, b: usize, stiffness: f64, damping: f64) {
        self.links.push((a, b, stiffness, damping));
    }

    /// Checks every module and lays the model out.
    pub fn build(self) -> Result<Model, ModelError> {
        let n_points = self.mass.len();
        let n_links = self.links.len();
        if n_points > u32::MAX as usize || n_links > (u32::MAX / 2) as usize {
            return Err(ModelError::TooLarge {
                points: n_points,
                links: n_links,
            });
        }
        if self.dt == Nanos::ZERO {
            return Err(ModelError::ZeroStep);
        }
        let dt = self.dt.as_secs_f64();
        let dt2 = dt * dt;

        let mut dt2_over_m = Vec::with_capacity(n_points);
        let mut masses = 0;
        for (point, (&mass, &position)) in self.mass.iter().zip(&self.position).enumerate() {
            if !position.is_finite() {
                return Err(ModelError::BadPosition { point, position });
            }
            dt2_over_m.push(match mass {
                None => 0.0,
                Some(m) => {
                    let c = dt2 / m;
                    if !(m.is_finite() && m > 0.0 && c.is_finite() && c > 0.0) {
                        return Err(ModelError::BadMass { point, mass: m });
                    }
                    masses += 1;
                    c
                }
            });
        }

        let mut links = Vec::with_capacity(n_links);
        for (link, &(a, b, stiffness, damping)) in self.links.iter().enumerate() {
            for point in [a, b] {
                if point >= n_points {
                    return Err(ModelError::UnknownPoint {
                        link,
                        point,
                        points: n_points,
                    });
                }
            }
            if a == b {
                return Err(ModelError::SelfLink { link, point: a });
            }
            let usable = |v: f64| v.is_finite() && v >= 0.0;
            if !(usable(stiffness) && usable(damping)) {
                return Err(ModelError::BadLink {
                    link,
                    stiffness,
                    damping,
                });
            }
            // The same link seen from its lower point: the force formula is symmetric.
            let (a, b) = if a < b { (a, b) } else { (b, a) };
            links.push((a, b, stiffness, damping / dt));
        }
        // Stable: links of one point keep the order they were added in.
        links.sort_by_key(|&(a, _, _, _)| a);

        // Incidence lists, each in increasing link order: the summation order of
        // the integration phase, the same for every partition.
        let mut incidence_start = vec![0u32; n_points + 1];
        for &(a, b, _, _) in &links {
            incidence_start[a + 1] += 1;
            incidence_start[b + 1] += 1;
        }
        for p in 0..n_points {
            incidence_start[p + 1] += incidence_start[p];
        }
        let mut fill: Vec<u32> = incidence_start[..n_points].to_vec();
        let mut incidence = vec![0u32; 2 * n_links];
        for (l, &(a, b, _, _)) in links.iter().enumerate() {
            let l = l as u32;
            incidence[fill[a] as usize] = 2 * l;
            fill[a] += 1;
            incidence[fill[b] as usize] = 2 * l + 1;
            fill[b] += 1;
        }

        let atomics = |v: &[f64]| v.iter().map(|&f| AtomicU64::new(f.to_bits())).collect();
        Ok(Model {
            dt: self.dt,
            masses,
            x: atomics(&self.position),
            x_prev: atomics(&self.position),
            dt2_over_m,
            link_a: links.iter().map(|l| l.0 as u32).collect(),
            link_b: links.iter().map(|l| l.1 as u32).collect(),
            stiffness: links.iter().map(|l| l.2).collect(),
            damping_per_step: links.iter().map(|l| l.3).collect(),
            force: (0..n_links).map(|_| AtomicU64::new(0)).collect(),
            incidence_start,
            incidence,
        })
    }
}

/// One thread's share of a [`Model`]: a contiguous block of points, and the links
/// whose lower point lies in it. The parts of [`Model::partition`] cover every
/// point and every link exactly once, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The points integrated by this part.
    pub points: Range<usize>,
    /// The links whose forces this part computes.
    pub links: Range<usize>,
}

/// A mass-interaction model (see the module documentation).
#[derive(Debug)]
pub struct Model {
    dt: Nanos,
    masses: usize,
    /// Position x[n] of each point, as `f64` bits.
    x: Vec<AtomicU64>,
    /// Previous position x[n-1] of each point, as `f64` bits.
    x_prev: Vec<AtomicU64>,
    /// `dt^2 / m` of each point; zero for a fixed point.
    dt2_over_m: Vec<f64>,
    /// Lower point of each link (sorted).
    link_a: Vec<u32>,
    /// Upper point of each link.
    link_b: Vec<u32>,
    /// `K` of each link.
    stiffness: Vec<f64>,
    /// `Z / dt` of each link.
    damping_per_step: Vec<f64>,
    /// Force of each link on its lower point, as `f64` bits, from the last force phase.
    force: Vec<AtomicU64>,
    /// Point `p`'s links are `incidence[incidence_start[p]..incidence_start[p + 1]]`.
    incidence_start: Vec<u32>,
    /// `2 * link` when the point is the link's lower end, `2 * link + 1` when upper.
    incidence: Vec<u32>,
}

impl Clone for Model {
    fn clone(&self) -> Self {
        let copy = |v: &[AtomicU64]| {
            v.iter()
                .map(|a| AtomicU64::new(load(a).to_bits()))
                .collect()
        };
        Model {
            dt: self.dt,
            masses: self.masses,
            x: copy(&self.x),
            x_prev: copy(&self.x_prev),
            dt2_over_m: self.dt2_over_m.clone(),
            link_a: self.link_a.clone(),
            link_b: self.link_b.clone(),
            stiffness: self.stiffness.clone(),
            damping_per_step: self.damping_per_step.clone(),
            force: copy(&self.force),
            incidence_start: self.incidence_start.clone(),
            incidence: self.incidence.clone(),
        }
    }
}

// Relaxed everywhere: within a step each value is written by one thread and read
// by others only after the rendezvous that ends the phase, which orders them.
fn load(a: &AtomicU64) -> f64 {
    f64::from_bits(a.load(Ordering::Relaxed))
}

fn store(a: &AtomicU64, v: f64) {
    a.store(v.to_bits(), Ordering::Relaxed);
}

impl Model {
    /// The vibrating string: `masses` masses in a row between two fixed ends, each
    /// linked to the next, all at rest at zero. Point 0 and point `masses + 1` are
    /// the fixed ends, points `1..=masses` the masses; `2 * masses + 1` modules.
    pub fn chain(masses: usize, params: &Params) -> Result<Model, ModelError> {
        let mut b = ModelBuilder::new(params.dt);
        b.fixed(0.0);
        for _ in 0..masses {
            b.mass(params.mass, 0.0);
        }
        b.fixed(0.0);
        for p in 0..=masses {
            b.link(p, p + 1, params.stiffness, params.damping);
        }
        b.build()
    }

    /// The membrane: a `width` by `height` grid of masses, each linked to its four
    /// neighbours, inside a frame of fixed points, all at rest at zero.
    ///
    /// Points are numbered row by row over the `(width + 2)` by `(height + 2)` grid
    /// frame included: the mass in row `r` and column `c` (from 0) is point
    /// `(r + 1) * (width + 2) + c + 1`. `width * height` masses and
    /// `2 * width * height + width + height` links.
    pub fn mesh(width: usize, height: usize, params: &Params) -> Result<Model, ModelError> {
        let (cols, rows) = (width + 2, height + 2);
        let is_mass = |r: usize, c: usize| (1..=height).contains(&r) && (1..=width).contains(&c);
        let mut b = ModelBuilder::new(params.dt);
        for r in 0..rows {
            for c in 0..cols {
                if is_mass(r, c) {
                    b.mass(params.mass, 0.0);
                } else {
                    b.fixed(0.0);
                }
            }
        }
        for r in 0..rows {
            for c in 0..cols {
                let p = r * cols + c;
                if c + 1 < cols && (is_mass(r, c) || is_mass(r, c + 1)) {
                    b.link(p, p + 1, params.stiffness, params.damping);
                }
                if r + 1 < rows && (is_mass(r, c) || is_mass(r + 1, c)) {
                    b.link(p, p + cols, params.stiffness, params.damping);
                }
            }
        }
        b.build()
    }

    /// The simulation step.
    pub fn dt(&self) -> Nanos {
        self.dt
    }

    /// Number of points, masses and fixed points.
    pub fn n_points(&self) -> usize {
        self.x.len()
    }

    /// Number of masses (`MAS`).
    pub fn n_masses(&self) -> usize {
        self.masses
    }

    /// Number of links (`REF`).
    pub fn n_links(&self) -> usize {
        self.link_a.len()
    }

    /// Number of modules as the seed counts them: masses plus links (fixed points
    /// cost nothing per step).
    pub fn n_modules(&self) -> usize {
        self.masses + self.n_links()
    }

    /// The whole model as one part.
    pub fn whole(&self) -> Part {
        Part {
            points: 0..self.n_points(),
            links: 0..self.n_links(),
        }
    }

    /// Splits the model into `k` parts of contiguous points and the links that start
    /// in them, balanced by modules (masses plus links). Parts may be empty when
    /// `k` exceeds the work there is. Allocates: call it before the hot loop.
    ///
    /// # Panics
    /// When `k` is zero.
    pub fn partition(&self, k: usize) -> Vec<Part> {
        assert!(k > 0, "a model splits into at least one part");
        let n = self.n_points();
        let total = self.n_modules() as u128;
        let links_from = |p: usize| self.link_a.partition_point(|&a| (a as usize) < p);
        let mut bounds = Vec::with_capacity(k + 1);
        bounds.push(0);
        let mut work: u128 = 0;
        let mut link = 0;
        for p in 0..n {
            if bounds.len() == k {
                break;
            }
            if self.dt2_over_m[p] != 0.0 {
                work += 1;
            }
            while link < self.link_a.len() && self.link_a[link] as usize == p {
                work += 1;
                link += 1;
            }
            // Part j ends at the first point where the work so far reaches j / k.
            while bounds.len() < k && work * k as u128 >= total * bounds.len() as u128 {
                bounds.push(p + 1);
            }
        }
        while bounds.len() <= k {
            bounds.push(n);
        }
        bounds[k] = n;
        bounds
            .windows(2)
            .map(|w| Part {
                points: w[0]..w[1],
                links: links_from(w[0])..links_from(w[1]),
            })
            .collect()
    }

    /// Phase 1 of a step for one part: each of its links computes its force from the
    /// positions of its two points. Reads positions anywhere; writes only the
    /// part's link forces.
    pub fn forces(&self, part: &Part) {
        let r = part.links.clone();
        let links = self.link_a[r.clone()]
            .iter()
            .zip(&self.link_b[r.clone()])
            .zip(
                self.stiffness[r.clone()]
                    .iter()
                    .zip(&self.damping_per_step[r.clone()]),
            )
            .zip(&self.force[r]);
        for (((&a, &b), (&k, &z)), f) in links {
            let (a, b) = (a as usize, b as usize);
            let (xa, xb) = (load(&self.x[a]), load(&self.x[b]));
            let (pa, pb) = (load(&self.x_prev[a]), load(&self.x_prev[b]));
            store(f, k * (xb - xa) + z * ((xb - pb) - (xa - pa)));
        }
    }

    /// Phase 2 of a step for one part: each of its masses sums the forces of its
    /// links and moves; its fixed points stay. Reads link forces anywhere; writes
    /// only the part's positions.
    pub fn integrate(&self, part: &Part) {
        for p in part.points.clone() {
            let x = load(&self.x[p]);
            let c = self.dt2_over_m[p];
            if c == 0.0 {
                store(&self.x_prev[p], x);
                continue;
            }
            let f = self.force_on(p);
            let xp = load(&self.x_prev[p]);
            store(&self.x_prev[p], x);
            store(&self.x[p], 2.0 * x - xp + c * f);
        }
    }

    /// One step of one part, for a thread that shares the model with others:
    /// [`forces`](Self::forces), `rendezvous()`, [`integrate`](Self::integrate),
    /// `rendezvous()`. Every thread calls it with its own part of the same
    /// [`partition`](Self::partition); `rendezvous` returns once all of them have
    /// called it, and orders memory as a barrier does (Release before, Acquire
    /// after).
    ///
    /// For input and output inside the step, call the phases directly: positions
    /// are stable during the force phase (read outputs there), and a point's owner
    /// may move it with [`set_position`](Self::set_position) right after its
    /// integration phase.
    ///
    /// ```
    /// use ictus_core::mass::{Model, Params};
    /// use std::sync::Barrier;
    /// let mut single = Model::chain(50, &Params::default()).unwrap();
    /// single.set_state(10, 1e-3, 1e-3);
    /// let shared = single.clone();
    /// let parts = shared.partition(3);
    /// let barrier = Barrier::new(parts.len());
    /// std::thread::scope(|s| {
    ///     for part in &parts {
    ///         let (model, barrier) = (&shared, &barrier);
    ///         s.spawn(move || {
    ///             for _ in 0..100 {
    ///                 model.step_part(part, || {
    ///                     barrier.wait();
    ///                 });
    ///             }
    ///         });
    ///     }
    /// });
    /// for _ in 0..100 {
    ///     single.step();
    /// }
    /// assert_eq!(shared.position(10).to_bits(), single.position(10).to_bits());
    /// ```
    pub fn step_part(&self, part: &Part, mut rendezvous: impl FnMut()) {
        self.forces(part);
        rendezvous();
        self.integrate(part);
        rendezvous();
    }

    /// One step of the whole model on the calling thread.
    pub fn step(&mut self) {
        let whole = self.whole();
        self.forces(&whole);
        self.integrate(&whole);
    }

    /// Position `x[n]` of a point.
    ///
    /// # Panics
    /// When `point` does not exist.
    pub fn position(&self, point: usize) -> f64 {
        load(&self.x[point])
    }

    /// Moves a point to `position`, keeping its previous position: a moved mass
    /// gains the velocity of the move; a moved fixed point is seen moving by the
    /// dampers of its links for one step, then rests at its new place. This is the
    /// input of a position-driven model.
    ///
    /// # Panics
    /// When `point` does not exist.
    pub fn set_position(&self, point: usize, position: f64) {
        store(&self.x[point], position);
    }

    /// Sets both the position `x[n]` and the previous position `x[n-1]` of a point
    /// (equal values: at rest).
    ///
    /// # Panics
    /// When `point` does not exist.
    pub fn set_state(&self, point: usize, position: f64, previous: f64) {
        store(&self.x[point], position);
        store(&self.x_prev[point], previous);
    }

    /// Sum of the link forces on a point, in newtons, as of the last force phase:
    /// the force a position-driven fixed point feeds back.
    ///
    /// # Panics
    /// When `point` does not exist.
    pub fn force_on(&self, point: usize) -> f64 {
        let from = self.incidence_start[point] as usize;
        let to = self.incidence_start[point + 1] as usize;
        let mut f = 0.0;
        for &e in &self.incidence[from..to] {
            let link_force = load(&self.force[(e / 2) as usize]);
            if e % 2 == 0 {
                f += link_force;
            } else {
                f -= link_force;
            }
        }
        f
    }

    /// Total energy in joules, in the discrete form the scheme conserves when
    /// undamped: kinetic `m/2 ((x[n] - x[n-1]) / dt)^2` per mass plus potential
    /// `K/2 e[n] e[n-1]` per link, `e` being its elongation.
    pub fn energy(&self) -> f64 {
        let mut e = 0.0;
        for p in 0..self.n_points() {
            let c = self.dt2_over_m[p];
            if c != 0.0 {
                let d = load(&self.x[p]) - load(&self.x_prev[p]);
                e += 0.5 * d * d / c;
            }
        }
        for l in 0..self.n_links() {
            let (a, b) = (self.link_a[l] as usize, self.link_b[l] as usize);
            let now = load(&self.x[b]) - load(&self.x[a]);
            let before = load(&self.x_prev[b]) - load(&self.x_prev[a]);
            e += 0.5 * self.stiffness[l] * now * before;
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    fn bits(model: &Model) -> Vec<(u64, u64)> {
        (0..model.n_points())
            .map(|p| {
                (
                    load(&model.x[p]).to_bits(),
                    load(&model.x_prev[p]).to_bits(),
                )
            })
            .collect()
    }

    /// A triangular pluck of a chain, at rest.
    fn plucked_chain(masses: usize, params: &Params) -> Model {
        let sut = Model::chain(masses, params).unwrap();
        let peak = masses / 3;
        for p in 1..=masses {
            let x = if p <= peak {
                p as f64 / peak as f64
            } else {
                (masses + 1 - p) as f64 / (masses + 1 - peak) as f64
            } * 1e-3;
            sut.set_state(p, x, x);
        }
        sut
    }

    /// A mesh with a few masses displaced and moving.
    fn struck_mesh(width: usize, height: usize, params: &Params) -> Model {
        let sut = Model::mesh(width, height, params).unwrap();
        let cols = width + 2;
        for (r, c, x) in [
            (0, 0, 1e-3),
            (height / 2, width / 2, -2e-3),
            (height - 1, 1, 5e-4),
        ] {
            sut.set_position((r + 1) * cols + c + 1, x);
        }
        sut
    }

    #[test]
    fn a_chain_counts_masses_links_and_modules() {
        let sut = Model::chain(10, &Params::default()).unwrap();
        assert_eq!(
            (sut.n_points(), sut.n_masses(), sut.n_links()),
            (12, 10, 11)
        );
        assert_eq!(sut.n_modules(), 21);
    }

    #[test]
    fn a_mesh_counts_masses_links_and_modules() {
        let sut = Model::mesh(4, 3, &Params::default()).unwrap();
        assert_eq!(sut.n_points(), 6 * 5);
        assert_eq!(sut.n_masses(), 12);
        assert_eq!(sut.n_links(), 2 * 12 + 4 + 3);
    }

    #[test]
    fn one_step_of_a_three_mass_chain_matches_the_hand_computation() {
        // m = 1 kg, dt = 0.5 s: dt^2/m = 0.25. K = 1 N/m, Z = 0.25 N.s/m: Z/dt = 0.5.
        let params = Params {
            mass: 1.0,
            stiffness: 1.0,
            damping: 0.25,
            dt: Nanos::from_millis(500),
        };
        let mut sut = Model::chain(3, &params).unwrap();
        // The middle mass at 1, coming from 0: moving by 1 per step.
        sut.set_position(2, 1.0);
        sut.step();
        // Link 1 (points 1-2): F = 1 * (1 - 0) + 0.5 * (1 - 0) = 1.5, +1.5 on 1, -1.5 on 2.
        // Link 2 (points 2-3): F = 1 * (0 - 1) + 0.5 * (0 - 1) = -1.5, -1.5 on 2, +1.5 on 3.
        assert_eq!(sut.force_on(1), 1.5);
        assert_eq!(sut.force_on(2), -3.0);
        assert_eq!(sut.force_on(3), 1.5);
        assert_eq!(sut.force_on(0), 0.0);
        // x1 = 2*0 - 0 + 0.25*1.5; x2 = 2*1 - 0 + 0.25*(-3); x3 like x1.
        let got: Vec<f64> = (0..5).map(|p| sut.position(p)).collect();
        assert_eq!(got, [0.0, 0.375, 1.25, 0.375, 0.0]);
        assert_eq!(load(&sut.x_prev[2]), 1.0);
    }

    #[test]
    fn an_undamped_chain_conserves_energy() {
        let params = Params {
            damping: 0.0,
            ..Params::default()
        };
        // dt sqrt(4K/m) = 1e-4 * 2e3 = 0.2, well below 2.
        let mut sut = plucked_chain(32, &params);
        let start = sut.energy();
        assert!(start > 0.0);
        let mut worst: f64 = 0.0;
        for _ in 0..10_000 {
            sut.step();
            worst = worst.max((sut.energy() - start).abs() / start);
        }
        assert!(worst < 1e-9, "relative energy drift {worst}");
    }

    #[test]
    fn damping_makes_energy_decrease_monotonically() {
        let params = Params {
            damping: 0.1,
            ..Params::default()
        };
        let mut sut = plucked_chain(32, &params);
        let start = sut.energy();
        let mut last = start;
        for _ in 0..10_000 {
            sut.step();
            let e = sut.energy();
            assert!(e <= last, "energy rose from {last} to {e}");
            last = e;
        }
        assert!(last < 0.5 * start, "energy {last} of {start} left");
    }

    #[test]
    fn partitions_cover_every_point_and_link_once_in_order() {
        for sut in [
            Model::chain(7, &Params::default()).unwrap(),
            Model::mesh(5, 4, &Params::default()).unwrap(),
        ] {
            for k in 1..=20 {
                let parts = sut.partition(k);
                assert_eq!(parts.len(), k);
                assert_eq!(parts[0].points.start, 0);
                assert_eq!(parts[0].links.start, 0);
                assert_eq!(parts[k - 1].points.end, sut.n_points());
                assert_eq!(parts[k - 1].links.end, sut.n_links());
                for w in parts.windows(2) {
                    assert_eq!(w[0].points.end, w[1].points.start);
                    assert_eq!(w[0].links.end, w[1].links.start);
                }
                for part in &parts {
                    for l in part.links.clone() {
                        assert!(part.points.contains(&(sut.link_a[l] as usize)));
                    }
                }
            }
        }
    }

    #[test]
    fn partitions_are_balanced_by_modules() {
        let sut = Model::chain(1_000, &Params::default()).unwrap();
        for part in sut.partition(4) {
            let modules = part.links.len() + part.points.len();
            assert!((495..=505).contains(&modules), "{part:?}");
        }
    }

    #[test]
    fn the_partitioned_step_equals_the_single_step_bit_for_bit() {
        for reference in [
            plucked_chain(29, &Params::default()),
            struck_mesh(7, 5, &Params::default()),
        ] {
            let mut single = reference.clone();
            for _ in 0..500 {
                single.step();
            }
            for k in 1..=4 {
                let sut = reference.clone();
                let parts = sut.partition(k);
                for _ in 0..500 {
                    // The phases of the parts in order, as K threads would run them
                    // between two rendezvous.
                    for part in &parts {
                        sut.forces(part);
                    }
                    for part in &parts {
                        sut.integrate(part);
                    }
                }
                assert_eq!(bits(&sut), bits(&single), "k = {k}");
            }
        }
    }

    #[test]
    fn the_threaded_step_equals_the_single_step_bit_for_bit() {
        let reference = struck_mesh(16, 9, &Params::default());
        let mut single = reference.clone();
        for _ in 0..300 {
            single.step();
        }
        for k in 1..=4 {
            let sut = reference.clone();
            let parts = sut.partition(k);
            let barrier = Barrier::new(k);
            std::thread::scope(|s| {
                for part in &parts {
                    let (sut, barrier) = (&sut, &barrier);
                    s.spawn(move || {
                        for _ in 0..300 {
                            sut.step_part(part, || {
                                barrier.wait();
                            });
                        }
                    });
                }
            });
            assert_eq!(bits(&sut), bits(&single), "k = {k}");
        }
    }

    #[test]
    fn a_moved_fixed_point_drives_the_chain_then_rests() {
        let mut sut = Model::chain(4, &Params::default()).unwrap();
        sut.set_position(0, 1e-3);
        sut.step();
        assert!(sut.position(1) > 0.0);
        assert_eq!(sut.position(0), 1e-3);
        // After the step its previous position caught up: no velocity left.
        assert_eq!(load(&sut.x_prev[0]), 1e-3);
    }

    #[test]
    fn links_may_be_added_in_any_order() {
        let mut b = ModelBuilder::new(Nanos::from_micros(100));
        let (m1, f, m0) = (b.mass(1e-3, 1e-3), b.fixed(0.0), b.mass(1e-3, 0.0));
        b.link(m0, m1, 1e3, 0.0);
        b.link(f, m1, 1e3, 0.0);
        b.link(m0, f, 1e3, 0.0);
        let mut sut = b.build().unwrap();
        assert!(sut.link_a.windows(2).all(|w| w[0] <= w[1]));
        let start = sut.energy();
        for _ in 0..1_000 {
            sut.step();
        }
        assert!((sut.energy() - start).abs() < 1e-9 * start);
    }

    #[test]
    fn bad_modules_are_refused_with_their_index() {
        let dt = Nanos::from_micros(100);
        let refuse = |f: &dyn Fn(&mut ModelBuilder)| {
            let mut b = ModelBuilder::new(dt);
            b.fixed(0.0);
            b.mass(1.0, 0.0);
            f(&mut b);
            b.build().unwrap_err()
        };
        assert_eq!(
            refuse(&|b| b.link(0, 2, 1.0, 0.0)),
            ModelError::UnknownPoint {
                link: 0,
                point: 2,
                points: 2
            }
        );
        assert_eq!(
            refuse(&|b| b.link(1, 1, 1.0, 0.0)),
            ModelError::SelfLink { link: 0, point: 1 }
        );
        assert!(matches!(
            refuse(&|b| b.link(0, 1, -1.0, 0.0)),
            ModelError::BadLink { link: 0, .. }
        ));
        assert!(matches!(
            refuse(&|b| {
                b.mass(0.0, 0.0);
            }),
            ModelError::BadMass { point: 2, .. }
        ));
        assert!(matches!(
            refuse(&|b| {
                b.fixed(f64::NAN);
            }),
            ModelError::BadPosition { point: 2, .. }
        ));
        let zero = Params {
            dt: Nanos::ZERO,
            ..Params::default()
        };
        assert_eq!(Model::chain(3, &zero).unwrap_err(), ModelError::ZeroStep);
    }
}

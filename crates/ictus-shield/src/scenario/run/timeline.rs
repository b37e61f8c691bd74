//! The timeline: running tasks per CPU and group, summed into buckets, coarsened.

use super::result::{Timeline, TimelineBucket};

/// The timeline keeps at most this many buckets (neighbours are merged beyond).
pub const MAX_BUCKETS: usize = 1000;

/// The timeline as it is sampled: the running tasks of the current bucket summed,
/// the buckets before it done.
pub(super) struct TimelineSums {
    pub(super) bucket_ns: u64,
    /// `sums[cpu][group]` over the current bucket's samples.
    pub(super) sums: Vec<Vec<u64>>,
    /// Samples in the current bucket.
    pub(super) samples: u32,
    /// The current bucket's index (its start over `bucket_ns`).
    pub(super) index: u64,
    pub(super) buckets: Vec<TimelineBucket>,
}

impl TimelineSums {
    pub(super) fn new(cpus: usize, groups: usize, bucket_ns: u64) -> TimelineSums {
        TimelineSums {
            bucket_ns,
            sums: vec![vec![0u64; groups]; cpus],
            samples: 0,
            index: 0,
            buckets: Vec::new(),
        }
    }

    /// Moves to the bucket of time `t`, closing the current one if `t` is past it.
    pub(super) fn move_to(&mut self, t: u64) {
        let b = t / self.bucket_ns;
        if b != self.index {
            self.flush();
            self.index = b;
        }
    }

    /// Adds one sample's running tasks, `counts[cpu][group]`.
    pub(super) fn add(&mut self, counts: &[Vec<u32>]) {
        for (row, c) in self.sums.iter_mut().zip(counts) {
            for (s, &v) in row.iter_mut().zip(c) {
                *s += u64::from(v);
            }
        }
        self.samples += 1;
    }

    /// Closes the current bucket: kept as means when it has samples; the sums start
    /// again from zero.
    pub(super) fn flush(&mut self) {
        if self.samples > 0 {
            let samples = self.samples;
            self.buckets.push(TimelineBucket {
                start_ns: self.index * self.bucket_ns,
                samples,
                running: self
                    .sums
                    .iter()
                    .map(|row| {
                        row.iter()
                            .map(|&s| (s as f64 / f64::from(samples) * 100.0).round() / 100.0)
                            .collect()
                    })
                    .collect(),
            });
        }
        for row in self.sums.iter_mut() {
            row.fill(0);
        }
        self.samples = 0;
    }
}

/// Merges neighbouring buckets (weighted by their samples) until at most `max` are left.
pub fn coarsen(timeline: &mut Timeline, max: usize) {
    while timeline.buckets.len() > max.max(1) {
        let wide = timeline.bucket_ns * 2;
        let mut merged: Vec<TimelineBucket> = Vec::with_capacity(timeline.buckets.len() / 2 + 1);
        for b in timeline.buckets.drain(..) {
            let start = b.start_ns / wide * wide;
            match merged.last_mut() {
                Some(m) if m.start_ns == start => {
                    let (wa, wb) = (f64::from(m.samples), f64::from(b.samples));
                    for (ra, rb) in m.running.iter_mut().zip(&b.running) {
                        for (a, v) in ra.iter_mut().zip(rb) {
                            *a = ((*a * wa + v * wb) / (wa + wb) * 100.0).round() / 100.0;
                        }
                    }
                    m.samples += b.samples;
                }
                _ => merged.push(TimelineBucket {
                    start_ns: start,
                    ..b
                }),
            }
        }
        timeline.buckets = merged;
        timeline.bucket_ns = wide;
    }
}

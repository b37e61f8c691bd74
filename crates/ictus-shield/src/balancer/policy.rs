//! The decisions, as pure functions over a snapshot: the placement at start and the
//! pushes.

use std::cmp::Ordering as CmpOrdering;

use ictus_core::CpuSet;

use super::prose::{return_reason, side, withheld_reason};
use super::{MIN_FREE_SHARE, TaskRole};
use crate::migrate::MigrationStats;

// ---------------------------------------------------------------------------------
// The decisions, as pure functions over a snapshot.
// ---------------------------------------------------------------------------------

/// Loads closer than this are equal (float noise never triggers a move).
const LOAD_EPSILON: f64 = 1e-9;

/// ARTiS's load of a CPU (seed 002 §3.2.2): `runnable / (1 - rt_share)`, with
/// `runnable` (L) the runnable non-real-time tasks and `rt_share` (RT) the smoothed
/// share of time real-time tasks used. The free share is floored at
/// [`MIN_FREE_SHARE`]; no runnable task means load 0.
pub fn load(runnable: u32, rt_share: f64) -> f64 {
    if runnable == 0 {
        return 0.0;
    }
    let free = (1.0 - rt_share.clamp(0.0, 1.0)).max(MIN_FREE_SHARE);
    f64::from(runnable) / free
}

/// One CPU as a balancing pass sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuState {
    /// The CPU.
    pub cpu: usize,
    /// Whether it is an RT CPU.
    pub rt: bool,
    /// L: registered non-real-time tasks runnable on it.
    pub runnable: u32,
    /// RT: smoothed share of its time used by registered real-time tasks, 0..=1.
    pub rt_share: f64,
}

impl CpuState {
    /// `L / (1 - RT)`.
    pub fn load(&self) -> f64 {
        load(self.runnable, self.rt_share)
    }
}

/// One registered task as a balancing pass sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    /// Its thread id.
    pub tid: i32,
    /// Its role.
    pub role: TaskRole,
    /// The CPU it is on (`None`: unknown, or not a CPU of the partition).
    pub cpu: Option<usize>,
    /// The CPUs it may ever be placed on.
    pub allowed: CpuSet,
    /// Whether it runs a real-time policy (its time counts in RT, not in L).
    pub realtime: bool,
    /// Whether it was runnable at the sample (it counts in L if not real-time).
    pub runnable: bool,
    /// Its own smoothed share of a CPU (real-time tasks), moved with it.
    pub rt_share: f64,
    /// Its migration statistics, from its reports.
    pub stats: MigrationStats,
    /// Whether it is inside a section (or may be: its reports were lost).
    pub in_section: bool,
}

/// Everything a balancing pass decides from.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Monotonic time of the snapshot, in ns (the clock of the tasks' statistics).
    pub now_ns: u64,
    /// The CPUs of the partition.
    pub cpus: Vec<CpuState>,
    /// The registered tasks.
    pub tasks: Vec<TaskState>,
}

/// One move a pass decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    /// Index of the task in [`Snapshot::tasks`].
    pub task: usize,
    /// Its thread id.
    pub tid: i32,
    /// The CPU it was on.
    pub from: Option<usize>,
    /// The CPU to pin it to.
    pub to: usize,
    /// Why, in words.
    pub reason: String,
}

/// What one pass decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassOutcome {
    /// The moves, in order; already applied to the snapshot.
    pub moves: Vec<Move>,
    /// Tasks not moved onto an RT CPU by the anti ping-pong rule.
    pub withheld: u64,
    /// Tasks not moved onto an RT CPU because they were inside a section.
    pub in_section: u64,
}

/// Why a task may not go to a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    /// An RT0 task: never moved.
    Fixed,
    /// Not one of its allowed CPUs, or not a CPU of the partition.
    NotAllowed,
    /// An RT CPU, and the task is inside a section.
    InSection,
    /// An RT CPU, and its next migration attempt is predicted soon.
    Withheld,
}

impl Snapshot {
    fn index_of(&self, cpu: usize) -> Option<usize> {
        self.cpus.iter().position(|c| c.cpu == cpu)
    }

    /// The load of `cpu` (0 for a CPU not in the snapshot).
    pub fn load_of(&self, cpu: usize) -> f64 {
        self.index_of(cpu).map_or(0.0, |i| self.cpus[i].load())
    }

    /// Whether `cpu` is an RT CPU of the snapshot.
    pub fn is_rt(&self, cpu: usize) -> bool {
        self.index_of(cpu).is_some_and(|i| self.cpus[i].rt)
    }

    /// Registered tasks on `cpu`.
    fn tasks_on(&self, cpu: usize) -> usize {
        self.tasks.iter().filter(|t| t.cpu == Some(cpu)).count()
    }

    /// Moves task `task` to CPU `to` as [`Snapshot::apply`] does, and returns that
    /// move, for `reason`.
    fn shift(&mut self, task: usize, to: usize, reason: String) -> Move {
        let (tid, from) = (self.tasks[task].tid, self.tasks[task].cpu);
        self.apply(task, to);
        Move {
            task,
            tid,
            from,
            to,
            reason,
        }
    }

    /// Moves task `task` to `to` in the snapshot: its contribution to RT (real-time: its
    /// own share) or to L goes with it. A non-real-time task counts in L where it goes
    /// even if it slept at the sample: it will run there next, and a pass placing
    /// several sleeping tasks must see each one it placed.
    pub fn apply(&mut self, task: usize, to: usize) {
        let Some(to_i) = self.index_of(to) else {
            return;
        };
        let t = &self.tasks[task];
        let from_i = t.cpu.and_then(|c| self.index_of(c));
        if from_i != Some(to_i) {
            if t.realtime {
                let mut share = t.rt_share.clamp(0.0, 1.0);
                if let Some(f) = from_i {
                    share = share.min(self.cpus[f].rt_share);
                    self.cpus[f].rt_share -= share;
                }
                self.cpus[to_i].rt_share = (self.cpus[to_i].rt_share + share).min(1.0);
            } else {
                if let Some(f) = from_i
                    && t.runnable
                {
                    self.cpus[f].runnable = self.cpus[f].runnable.saturating_sub(1);
                }
                self.cpus[to_i].runnable += 1;
                self.tasks[task].runnable = true;
            }
        }
        self.tasks[task].cpu = Some(to);
    }

    /// Whether task `t` may be pinned to `to`: the one check every pass goes through.
    fn admissible(&self, t: &TaskState, to: usize, horizon_ns: u64) -> Result<(), Block> {
        if t.role == TaskRole::Rt0 {
            return Err(Block::Fixed);
        }
        if !t.allowed.contains(to) || self.index_of(to).is_none() {
            return Err(Block::NotAllowed);
        }
        if self.is_rt(to) {
            if t.in_section {
                return Err(Block::InSection);
            }
            if !t.stats.may_return(self.now_ns, horizon_ns) {
                return Err(Block::Withheld);
            }
        }
        Ok(())
    }

    /// The CPU's rank as a home for task `t` (lower is better): for a non-real-time
    /// task the load with it added, for a real-time task the real-time share with it
    /// added; then fewer tasks, then the lower number.
    fn home_key(&self, t: &TaskState, cpu_i: usize) -> (f64, f64, usize, usize) {
        let c = &self.cpus[cpu_i];
        let here = t.cpu == Some(c.cpu);
        let others = self.tasks_on(c.cpu) - usize::from(here);
        if t.realtime {
            let share = if here {
                c.rt_share
            } else {
                c.rt_share + t.rt_share
            };
            (share, c.load(), others, c.cpu)
        } else {
            let l = if here && t.runnable {
                c.runnable
            } else {
                c.runnable + 1
            };
            (load(l, c.rt_share), c.rt_share, others, c.cpu)
        }
    }
}

fn cmp_key(a: &(f64, f64, usize, usize), b: &(f64, f64, usize, usize)) -> CmpOrdering {
    a.0.total_cmp(&b.0)
        .then(a.1.total_cmp(&b.1))
        .then(a.2.cmp(&b.2))
        .then(a.3.cmp(&b.3))
}

/// The placement at start: every movable task is placed once. RT1+ tasks are first
/// put over the RT CPUs and normal tasks over the NRT CPUs they are allowed on, each
/// on the least loaded one, counting the tasks placed before it (and every task as
/// runnable: one asleep now runs soon). An RT1+ task that may not go to an RT CPU now
/// (inside a section, or its next attempt predicted soon), or is allowed on none, goes
/// to the other side; so does a normal task allowed on no NRT CPU. Then [`push_rt`]
/// and [`push_one`] run on that layout until nothing moves, so that the placement is
/// already the one the passes keep (seed 002 Table 3: 10 normal tasks on the NRT CPU
/// and 1 on each busy RT CPU at once). Every task placed yields one move, even to the
/// CPU it is on: the pin is the point.
pub fn place_all(snapshot: &mut Snapshot, horizon_ns: u64) -> PassOutcome {
    let mut out = PassOutcome::default();
    let movable = |t: &TaskState| {
        t.role != TaskRole::Rt0 && snapshot.cpus.iter().any(|c| t.allowed.contains(c.cpu))
    };
    let mut order: Vec<usize> = (0..snapshot.tasks.len())
        .filter(|&i| movable(&snapshot.tasks[i]))
        .collect();
    order.sort_by_key(|&i| {
        (
            snapshot.tasks[i].role != TaskRole::Rt1,
            snapshot.tasks[i].tid,
        )
    });
    // Take the movable tasks off their CPUs: they are all being placed. Set aside with
    // no CPU, they count nowhere until placed, and then as runnable.
    let mut work = snapshot.clone();
    take_off(&mut work, &order);
    let mut first: Vec<Option<(usize, String)>> = vec![None; work.tasks.len()];
    for &i in &order {
        first[i] = place_first(&mut work, i, snapshot.tasks[i].cpu, horizon_ns, &mut out);
    }
    // Settle: the layout the passes would reach, reached now.
    for _ in 0..2 * order.len() + 4 {
        let rt = push_rt(&mut work, horizon_ns);
        let one = push_one(&mut work, horizon_ns);
        if rt.moves.is_empty() && one.moves.is_empty() {
            break;
        }
    }
    out.moves = start_moves(snapshot, &work, &order, &first);
    for m in &out.moves {
        snapshot.apply(m.task, m.to);
    }
    out
}

/// Takes the tasks of `order` off their CPUs in `work`: no CPU, and runnable.
fn take_off(work: &mut Snapshot, order: &[usize]) {
    for &i in order {
        let t = &work.tasks[i];
        if let Some(f) = t.cpu.and_then(|c| work.index_of(c)) {
            if t.realtime {
                work.cpus[f].rt_share = (work.cpus[f].rt_share - t.rt_share).max(0.0);
            } else if t.runnable {
                work.cpus[f].runnable = work.cpus[f].runnable.saturating_sub(1);
            }
        }
        work.tasks[i].cpu = None;
        work.tasks[i].runnable = true;
    }
}

/// Places task `i` of `work` on the least loaded CPU of its side it may go to, else
/// of the other side (counted in `out` when withheld or inside a section): the CPU
/// and why. With nowhere to go it stays where it was (`was`), and counts there.
fn place_first(
    work: &mut Snapshot,
    i: usize,
    was: Option<usize>,
    horizon_ns: u64,
    out: &mut PassOutcome,
) -> Option<(usize, String)> {
    let t = work.tasks[i].clone();
    let prefer_rt = t.role == TaskRole::Rt1;
    let mut blocked = None;
    let candidates: Vec<usize> = (0..work.cpus.len())
        .filter(
            |&c| match work.admissible(&t, work.cpus[c].cpu, horizon_ns) {
                Ok(()) => true,
                Err(b) => {
                    if work.cpus[c].rt == prefer_rt && b != Block::NotAllowed {
                        blocked = Some(b);
                    }
                    false
                }
            },
        )
        .collect();
    let preferred: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&c| work.cpus[c].rt == prefer_rt)
        .collect();
    let pool = if preferred.is_empty() {
        match blocked {
            Some(Block::Withheld) => out.withheld += 1,
            Some(Block::InSection) => out.in_section += 1,
            _ => {}
        }
        &candidates
    } else {
        &preferred
    };
    let Some(&best) = pool
        .iter()
        .min_by(|&&a, &&b| cmp_key(&work.home_key(&t, a), &work.home_key(&t, b)))
    else {
        // Nowhere to go: it stays, and counts where it is.
        if let Some(c) = was {
            work.apply(i, c);
        }
        return None;
    };
    let to = work.cpus[best].cpu;
    let why = if !preferred.is_empty() {
        format!("{} side", side(prefer_rt))
    } else {
        match blocked {
            Some(Block::InSection) => "inside a section".to_string(),
            Some(Block::Withheld) => withheld_reason(&t.stats, work.now_ns),
            _ => format!("no {} CPU allowed", side(prefer_rt)),
        }
    };
    work.apply(i, to);
    Some((to, why))
}

/// The moves of the placement at start: each task of `order` from its CPU in
/// `snapshot` to its CPU in `work`, with why it went `first` and whether the load
/// moved it since.
fn start_moves(
    snapshot: &Snapshot,
    work: &Snapshot,
    order: &[usize],
    first: &[Option<(usize, String)>],
) -> Vec<Move> {
    let mut moves = Vec::new();
    for &i in order {
        let (Some((at_first, why)), Some(to)) = (&first[i], work.tasks[i].cpu) else {
            continue;
        };
        let why = if *at_first == to {
            why.clone()
        } else {
            format!("{why}, then balanced by load")
        };
        let t = &work.tasks[i];
        moves.push(Move {
            task: i,
            tid: t.tid,
            from: snapshot.tasks[i].cpu,
            to,
            reason: format!(
                "start: {} to {} CPU {to} ({why}; load there {:.1})",
                t.role,
                side(work.is_rt(to)),
                work.load_of(to)
            ),
        });
    }
    moves
}

/// The frequent RT push (seed 002 §3.2.5, `only_rt`): RT1+ tasks on NRT CPUs go to the
/// least loaded RT CPU they are allowed on, unless inside a section or withheld by the
/// anti ping-pong rule. A real-time RT1+ task goes whatever the load (its time counts
/// in RT, not in L, as in ARTiS). A non-real-time one (`SCHED_FIFO` refused, say)
/// counts in L: it goes only if the RT CPU with it is no more loaded than the least
/// loaded NRT CPU it may use (counting it there), so that [`push_one`] never sends it
/// back; else it swaps places with a normal task on an RT CPU, which leaves every load
/// as it was. Moves are applied to the snapshot as made.
pub fn push_rt(snapshot: &mut Snapshot, horizon_ns: u64) -> PassOutcome {
    let mut out = PassOutcome::default();
    for i in 0..snapshot.tasks.len() {
        let t = snapshot.tasks[i].clone();
        let Some(from) = t.cpu.filter(|&c| snapshot.index_of(c).is_some()) else {
            continue;
        };
        if t.role != TaskRole::Rt1 || snapshot.is_rt(from) {
            continue;
        }
        let rt_allowed: Vec<usize> = (0..snapshot.cpus.len())
            .filter(|&c| snapshot.cpus[c].rt && t.allowed.contains(snapshot.cpus[c].cpu))
            .collect();
        let Some(&any_rt) = rt_allowed.first() else {
            continue;
        };
        match snapshot.admissible(&t, snapshot.cpus[any_rt].cpu, horizon_ns) {
            Err(Block::InSection) => {
                out.in_section += 1;
                continue;
            }
            Err(Block::Withheld) => {
                out.withheld += 1;
                continue;
            }
            Err(_) => continue,
            Ok(()) => {}
        }
        let Some(&best) = rt_allowed
            .iter()
            .min_by(|&&a, &&b| cmp_key(&snapshot.home_key(&t, a), &snapshot.home_key(&t, b)))
        else {
            continue;
        };
        let to = snapshot.cpus[best].cpu;
        let why = return_reason(&t.stats, snapshot.now_ns);
        if t.realtime {
            let reason = format!("{} back to RT CPU {to}: {why}", t.role);
            out.moves.push(snapshot.shift(i, to, reason));
            continue;
        }
        let on_rt = snapshot.home_key(&t, best).0;
        let on_nrt = (0..snapshot.cpus.len())
            .filter(|&c| !snapshot.cpus[c].rt && t.allowed.contains(snapshot.cpus[c].cpu))
            .map(|c| snapshot.home_key(&t, c).0)
            .fold(f64::INFINITY, f64::min);
        if on_rt <= on_nrt + LOAD_EPSILON {
            let reason = format!(
                "{} back to RT CPU {to}: {why}; load there with it {on_rt:.1}, \
                 {on_nrt:.1} at best on an NRT CPU",
                t.role
            );
            out.moves.push(snapshot.shift(i, to, reason));
            continue;
        }
        // A swap with a normal task on an RT CPU: same loads, each on its side.
        let partner = rt_allowed
            .iter()
            .filter_map(|&c| {
                let cpu = snapshot.cpus[c].cpu;
                (0..snapshot.tasks.len())
                    .filter(|&j| {
                        let u = &snapshot.tasks[j];
                        u.cpu == Some(cpu)
                            && u.role == TaskRole::Normal
                            && !u.realtime
                            && u.runnable == t.runnable
                            && snapshot.admissible(u, from, horizon_ns).is_ok()
                    })
                    .min_by_key(|&j| snapshot.tasks[j].tid)
                    .map(|j| (c, j))
            })
            .min_by(|a, b| cmp_key(&snapshot.home_key(&t, a.0), &snapshot.home_key(&t, b.0)));
        if let Some((c, j)) = partner {
            let to = snapshot.cpus[c].cpu;
            let (u_tid, u_role) = (snapshot.tasks[j].tid, snapshot.tasks[j].role);
            let reason = format!(
                "{} back to RT CPU {to}: {why}; swapped with {u_role} task {u_tid}, \
                 loads unchanged",
                t.role
            );
            out.moves.push(snapshot.shift(i, to, reason));
            let reason = format!(
                "{u_role} off RT CPU {to} to NRT CPU {from}: swapped with {} task {}, \
                 loads unchanged",
                t.role, t.tid
            );
            out.moves.push(snapshot.shift(j, from, reason));
        }
    }
    out
}

/// The other push (seed 002 §3.2.3 to §3.2.5): one non-real-time runnable task goes
/// from the most loaded CPU to the least loaded one, if that lowers the higher of the
/// two loads, i.e. the difference is worth more than one task on the destination.
/// Off an RT CPU normal tasks go first, RT1+ tasks only when no normal task there
/// may; onto an RT CPU RT1+ tasks go first, then the tasks whose next attempt is
/// predicted furthest away; between NRT CPUs normal tasks go first, between RT CPUs
/// RT1+ tasks. When the busiest pair has no task that may move, the next pair is
/// tried. The move, if any, is applied to the snapshot.
pub fn push_one(snapshot: &mut Snapshot, horizon_ns: u64) -> PassOutcome {
    let mut out = PassOutcome::default();
    let n = snapshot.cpus.len();
    let mut by_load: Vec<usize> = (0..n).collect();
    by_load.sort_by(|&a, &b| {
        snapshot.cpus[a]
            .load()
            .total_cmp(&snapshot.cpus[b].load())
            .then(snapshot.cpus[a].cpu.cmp(&snapshot.cpus[b].cpu))
    });
    let mut counted = vec![false; snapshot.tasks.len()];
    for &s in by_load.iter().rev() {
        let src = snapshot.cpus[s].clone();
        let src_load = src.load();
        if src_load <= LOAD_EPSILON {
            break;
        }
        for &d in &by_load {
            let dst = &snapshot.cpus[d];
            if d == s || load(dst.runnable + 1, dst.rt_share) + LOAD_EPSILON >= src_load {
                continue;
            }
            let dst = dst.clone();
            let mut candidates: Vec<usize> = (0..snapshot.tasks.len())
                .filter(|&i| {
                    let t = &snapshot.tasks[i];
                    t.cpu == Some(src.cpu)
                        && t.role != TaskRole::Rt0
                        && !t.realtime
                        && t.runnable
                        && t.allowed.contains(dst.cpu)
                })
                .collect();
            let now = snapshot.now_ns;
            candidates.sort_by_key(|&i| {
                let t = &snapshot.tasks[i];
                let first_role = if dst.rt {
                    TaskRole::Rt1
                } else {
                    TaskRole::Normal
                };
                let quiet = t
                    .stats
                    .predicted_next_ns()
                    .map_or(u64::MAX, |next| next.saturating_sub(now));
                (
                    t.role != first_role,
                    if dst.rt { u64::MAX - quiet } else { 0 },
                    t.tid,
                )
            });
            for i in candidates {
                let t = &snapshot.tasks[i];
                match snapshot.admissible(t, dst.cpu, horizon_ns) {
                    Ok(()) => {}
                    Err(b) => {
                        if !counted[i] {
                            counted[i] = true;
                            match b {
                                Block::InSection => out.in_section += 1,
                                Block::Withheld => out.withheld += 1,
                                _ => {}
                            }
                        }
                        continue;
                    }
                }
                let how = match (src.rt, dst.rt) {
                    (true, false) => format!("off RT CPU {} to NRT CPU {}", src.cpu, dst.cpu),
                    (false, true) => format!("onto RT CPU {} from NRT CPU {}", dst.cpu, src.cpu),
                    _ => format!("from CPU {} to CPU {}", src.cpu, dst.cpu),
                };
                let reason = format!(
                    "{} {how}: load {:.1} vs {:.1}",
                    t.role,
                    src_load,
                    dst.load()
                );
                out.moves.push(snapshot.shift(i, dst.cpu, reason));
                return out;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::balancer::prose::words;

    const HORIZON: u64 = 20_000_000;

    fn cpu(cpu: usize, rt: bool) -> CpuState {
        CpuState {
            cpu,
            rt,
            runnable: 0,
            rt_share: 0.0,
        }
    }

    /// CPUs 0, 1, ... as `layout` says, one letter each: `N` for NRT, `R` for RT.
    fn cpus(layout: &str) -> Vec<CpuState> {
        layout
            .chars()
            .enumerate()
            .map(|(c, kind)| cpu(c, kind == 'R'))
            .collect()
    }

    fn task(tid: i32, role: TaskRole, on: usize, allowed: &str) -> TaskState {
        TaskState {
            tid,
            role,
            cpu: Some(on),
            allowed: allowed.parse().unwrap(),
            realtime: false,
            runnable: true,
            rt_share: 0.0,
            stats: MigrationStats::default(),
            in_section: false,
        }
    }

    /// A snapshot whose L and RT are those of its tasks.
    fn snapshot(now_ns: u64, cpus: Vec<CpuState>, tasks: Vec<TaskState>) -> Snapshot {
        let mut s = Snapshot {
            now_ns,
            cpus,
            tasks,
        };
        for c in &mut s.cpus {
            c.runnable = 0;
            c.rt_share = 0.0;
        }
        for t in s.tasks.clone() {
            let Some(i) = t.cpu.and_then(|c| s.index_of(c)) else {
                continue;
            };
            if t.realtime {
                s.cpus[i].rt_share = (s.cpus[i].rt_share + t.rt_share).min(1.0);
            } else if t.runnable {
                s.cpus[i].runnable += 1;
            }
        }
        s
    }

    /// Runs RT pushes and pushes until nothing moves (at most `limit` rounds).
    fn settle(s: &mut Snapshot, limit: usize) -> PassOutcome {
        let mut all = PassOutcome::default();
        for _ in 0..limit {
            let rt = push_rt(s, HORIZON);
            let one = push_one(s, HORIZON);
            let moved = !rt.moves.is_empty() || !one.moves.is_empty();
            all.withheld += rt.withheld + one.withheld;
            all.in_section += rt.in_section + one.in_section;
            all.moves.extend(rt.moves);
            all.moves.extend(one.moves);
            if !moved {
                return all;
            }
        }
        panic!("no fixed point after {limit} rounds: {s:#?}");
    }

    fn count_on(s: &Snapshot, cpu: usize, role: TaskRole) -> usize {
        s.tasks
            .iter()
            .filter(|t| t.cpu == Some(cpu) && t.role == role)
            .count()
    }

    /// Stats of a task attempting every `period_ns`, the last attempt `ago_ns` before
    /// `now_ns`.
    fn attempting(period_ns: u64, now_ns: u64, ago_ns: u64) -> MigrationStats {
        let mut s = MigrationStats::default();
        let last = now_ns - ago_ns;
        for k in (0..5).rev() {
            s.record(last - k * period_ns);
        }
        s
    }

    /// Seed table 3's three RT0 tasks, busy 90 % of CPUs 1, 2 and 3 each.
    fn three_busy_rt0() -> Vec<TaskState> {
        (1..4)
            .map(|c| {
                let mut t = task(c as i32, TaskRole::Rt0, c, &c.to_string());
                t.realtime = true;
                t.rt_share = 0.9;
                t
            })
            .collect()
    }

    /// Seed table 4's tasks of `role` on CPUs 0 and 1: 8 often migrating (tids 10 to
    /// 17: every 200 us, the last 50 us before `now`) and 8 rarely (tids 20 to 27:
    /// every 200 ms, the last 1 ms before).
    fn often_and_rarely_migrating(role: TaskRole, now: u64) -> Vec<TaskState> {
        let mut tasks = Vec::new();
        for k in 0..8 {
            let mut om = task(10 + k, role, (k % 2) as usize, "0-3");
            om.stats = attempting(200_000, now, 50_000);
            tasks.push(om);
            let mut im = task(20 + k, role, (k % 2) as usize, "0-3");
            im.stats = attempting(200_000_000, now, 1_000_000);
            tasks.push(im);
        }
        tasks
    }

    /// Of seed table 4's tasks, the rarely migrating ones are on the RT CPUs (2 and
    /// 3) and only they.
    fn assert_rarely_migrating_on_rt(sut: &Snapshot) {
        for t in &sut.tasks {
            let on_rt = t.cpu.is_some_and(|c| c >= 2);
            assert_eq!(on_rt, t.tid >= 20, "task {}", t.tid);
        }
    }

    #[test]
    fn load_is_runnable_over_the_free_share() {
        assert_eq!(load(2, 0.0), 2.0);
        assert!((load(2, 0.5) - 4.0).abs() < 1e-12);
        assert!((load(1, 0.9) - 10.0).abs() < 1e-9);
        assert_eq!(load(0, 0.9), 0.0, "no runnable task: no load, as in ARTiS");
        assert!((load(1, 1.0) - 1.0 / MIN_FREE_SHARE).abs() < 1e-9);
        assert!((load(1, 1.5) - 1.0 / MIN_FREE_SHARE).abs() < 1e-9);
    }

    #[test]
    fn seed_figure_2_five_tasks_beside_a_three_quarter_rt_task_split_four_one() {
        // Seed 002 §3.2.2: 2 CPUs, an RT task using 3/4 of CPU 1, 5 Linux tasks.
        let mut rt = task(1, TaskRole::Rt0, 1, "1");
        rt.realtime = true;
        rt.rt_share = 0.75;
        let mut tasks = vec![rt];
        tasks.extend((0..5).map(|k| task(10 + k, TaskRole::Normal, (k % 2) as usize, "0-1")));
        let mut sut = snapshot(0, cpus("NR"), tasks);
        settle(&mut sut, 20);
        assert_eq!(count_on(&sut, 0, TaskRole::Normal), 4);
        assert_eq!(count_on(&sut, 1, TaskRole::Normal), 1);
    }

    #[test]
    fn seed_table_3_thirteen_normal_tasks_beside_three_busy_rt0_tasks_go_ten_one_one_one() {
        let mut tasks = three_busy_rt0();
        // Stock placement: the 13 normal tasks spread evenly, 4 3 3 3.
        tasks.extend((0..13).map(|k| task(100 + k, TaskRole::Normal, (k % 4) as usize, "0-3")));
        let mut sut = snapshot(0, cpus("NRRR"), tasks);
        let before: Vec<f64> = (0..4).map(|c| sut.load_of(c)).collect();
        assert!((before[1] - 30.0).abs() < 1e-6, "3 tasks at 10 % free");
        let pass = settle(&mut sut, 50);
        assert_eq!(count_on(&sut, 0, TaskRole::Normal), 10);
        for c in 1..4 {
            assert_eq!(count_on(&sut, c, TaskRole::Normal), 1, "CPU {c}");
            assert_eq!(count_on(&sut, c, TaskRole::Rt0), 1, "RT0 stays on CPU {c}");
        }
        assert!(
            pass.moves
                .iter()
                .all(|m| m.reason.starts_with("normal off RT CPU"))
        );
        // Equity: every normal task gets about a tenth of a CPU.
        for c in 0..4 {
            assert!(
                (sut.load_of(c) - 10.0).abs() < 1e-6,
                "CPU {c}: {}",
                sut.load_of(c)
            );
        }
    }

    #[test]
    fn seed_table_3_from_the_placement_at_start_too() {
        let mut tasks = three_busy_rt0();
        tasks.extend((0..13).map(|k| task(100 + k, TaskRole::Normal, 1, "0-3")));
        let mut sut = snapshot(0, cpus("NRRR"), tasks);
        let placed = place_all(&mut sut, HORIZON);
        assert_eq!(placed.moves.len(), 13, "every movable task is placed once");
        assert_eq!(
            count_on(&sut, 0, TaskRole::Normal),
            10,
            "the settled layout at once"
        );
        for c in 1..4 {
            assert_eq!(count_on(&sut, c, TaskRole::Normal), 1, "CPU {c}");
        }
        let to_rt: Vec<&Move> = placed.moves.iter().filter(|m| m.to != 0).collect();
        assert_eq!(to_rt.len(), 3);
        assert!(
            to_rt
                .iter()
                .all(|m| m.reason.contains("then balanced by load")),
            "{to_rt:?}"
        );
        assert!(settle(&mut sut, 5).moves.is_empty(), "the passes keep it");
    }

    #[test]
    fn seed_table_5_rt1_tasks_take_the_rt_cpus_and_normal_tasks_the_nrt_cpus() {
        // NRT NRT RT RT; 8 RT50 tasks and 8 normal tasks, spread evenly at first.
        for realtime in [true, false] {
            let mut tasks = Vec::new();
            for k in 0..8 {
                let mut t = task(10 + k, TaskRole::Rt1, (k % 4) as usize, "0-3");
                t.realtime = realtime;
                t.rt_share = 0.5;
                tasks.push(t);
                tasks.push(task(20 + k, TaskRole::Normal, (k % 4) as usize, "0-3"));
            }
            let mut sut = snapshot(0, cpus("NNRR"), tasks);
            settle(&mut sut, 50);
            for c in [0, 1] {
                assert_eq!(count_on(&sut, c, TaskRole::Rt1), 0, "realtime {realtime}");
                assert_eq!(
                    count_on(&sut, c, TaskRole::Normal),
                    4,
                    "realtime {realtime}"
                );
            }
            for c in [2, 3] {
                assert_eq!(count_on(&sut, c, TaskRole::Rt1), 4, "realtime {realtime}");
                assert_eq!(
                    count_on(&sut, c, TaskRole::Normal),
                    0,
                    "realtime {realtime}"
                );
            }
        }
    }

    #[test]
    fn seed_table_5_the_placement_at_start_sorts_the_roles() {
        let mut tasks = Vec::new();
        for k in 0..8 {
            tasks.push(task(10 + k, TaskRole::Rt1, 0, "0-3"));
            tasks.push(task(20 + k, TaskRole::Normal, 3, "0-3"));
        }
        let mut sut = snapshot(0, cpus("NNRR"), tasks);
        let pass = place_all(&mut sut, HORIZON);
        assert_eq!(pass.moves.len(), 16);
        for (c, rt1, normal) in [(0, 0, 4), (1, 0, 4), (2, 4, 0), (3, 4, 0)] {
            assert_eq!(count_on(&sut, c, TaskRole::Rt1), rt1, "CPU {c}");
            assert_eq!(count_on(&sut, c, TaskRole::Normal), normal, "CPU {c}");
        }
        assert!(pass.moves.iter().all(|m| m.reason.starts_with("start: ")));
    }

    #[test]
    fn seed_table_4_often_migrating_rt1_tasks_are_withheld_rarely_migrating_ones_return() {
        let now = 10_000_000_000;
        let tasks = often_and_rarely_migrating(TaskRole::Rt1, now);
        let mut sut = snapshot(now, cpus("NNRR"), tasks);
        let pass = push_rt(&mut sut, HORIZON);
        assert_eq!(pass.withheld, 8);
        assert_eq!(pass.moves.len(), 8);
        assert!(pass.moves.iter().all(|m| (20..28).contains(&m.tid)));
        assert!(pass.moves.iter().all(|m| m.to >= 2));
        assert!(
            pass.moves[0]
                .reason
                .contains("next attempt predicted in 199 ms"),
            "{}",
            pass.moves[0].reason
        );
        assert_rarely_migrating_on_rt(&sut);
    }

    #[test]
    fn seed_table_4_normal_tasks_the_push_favours_the_rarely_migrating_ones() {
        let now = 10_000_000_000;
        let tasks = often_and_rarely_migrating(TaskRole::Normal, now);
        let mut sut = snapshot(now, cpus("NNRR"), tasks);
        let pass = settle(&mut sut, 50);
        assert!(
            pass.moves.iter().all(|m| m.tid >= 20),
            "only IM tasks go to RT CPUs"
        );
        for c in 0..4 {
            assert_eq!(sut.load_of(c), 4.0, "balanced: CPU {c}");
        }
        assert_rarely_migrating_on_rt(&sut);
    }

    #[test]
    fn an_often_migrating_task_alone_is_withheld_even_from_an_idle_rt_cpu() {
        let now = 1_000_000_000;
        let mut om = task(10, TaskRole::Normal, 0, "0-1");
        om.stats = attempting(200_000, now, 50_000);
        let mut other = task(11, TaskRole::Normal, 0, "0");
        other.stats = MigrationStats::default();
        let mut sut = snapshot(now, cpus("NR"), vec![om, other]);
        let pass = push_one(&mut sut, HORIZON);
        assert!(pass.moves.is_empty());
        assert_eq!(pass.withheld, 1);
    }

    #[test]
    fn a_task_inside_a_section_is_not_moved_onto_an_rt_cpu() {
        let mut t = task(10, TaskRole::Rt1, 0, "0-1");
        t.in_section = true;
        let mut sut = snapshot(0, cpus("NR"), vec![t.clone()]);
        let pass = push_rt(&mut sut, HORIZON);
        assert!(pass.moves.is_empty());
        assert_eq!(pass.in_section, 1);
        let placed = place_all(&mut sut, HORIZON);
        assert_eq!(placed.moves[0].to, 0, "placed on the NRT side instead");
        assert!(placed.moves[0].reason.contains("inside a section"));
        assert_eq!(placed.in_section, 1);
    }

    #[test]
    fn non_realtime_rt1_tasks_spread_when_their_rt_cpu_cannot_hold_them() {
        // FIFO refused: 6 RT1 tasks run SCHED_OTHER and count in L. One RT CPU cannot
        // hold them all while 3 NRT CPUs idle.
        let cpus = cpus("NNNR");
        let tasks = (0..6)
            .map(|k| task(10 + k, TaskRole::Rt1, 3, "0-3"))
            .collect();
        let mut sut = snapshot(0, cpus.clone(), tasks);
        let pass = settle(&mut sut, 20);
        assert!(
            pass.moves.iter().all(|m| m.from == Some(3)),
            "off the RT CPU only"
        );
        assert_eq!(
            count_on(&sut, 3, TaskRole::Rt1),
            2,
            "the RT CPU keeps its share"
        );
        for c in 0..3 {
            assert!(sut.load_of(c) <= 2.0, "CPU {c}: {}", sut.load_of(c));
        }
        // The placement at start reaches the same layout, in one move per task.
        let tasks = (0..6)
            .map(|k| task(10 + k, TaskRole::Rt1, 3, "0-3"))
            .collect();
        let mut sut = snapshot(0, cpus, tasks);
        assert_eq!(place_all(&mut sut, HORIZON).moves.len(), 6);
        assert_eq!(count_on(&sut, 3, TaskRole::Rt1), 2);
        assert!(settle(&mut sut, 5).moves.is_empty());
    }

    #[test]
    fn sleeping_rt1_tasks_are_not_all_pushed_onto_one_rt_cpu_in_one_pass() {
        // Seen live: tasks asleep at a start gate count in no L, and one pass sent
        // every one of them to the same RT CPU.
        let cpus = cpus("NNNR");
        let tasks = (0..3)
            .map(|k| {
                let mut t = task(10 + k, TaskRole::Rt1, k as usize, "0-3");
                t.runnable = false;
                t
            })
            .collect();
        let mut sut = snapshot(0, cpus, tasks);
        let pass = push_rt(&mut sut, HORIZON);
        assert_eq!(pass.moves.len(), 1, "{:?}", pass.moves);
        assert_eq!(sut.cpus[3].runnable, 1, "the task placed counts there");
        assert!(push_rt(&mut sut, HORIZON).moves.is_empty());
    }

    #[test]
    fn realtime_rt1_tasks_go_to_rt_cpus_whatever_their_load() {
        let cpus = cpus("NR");
        let tasks = (0..4)
            .map(|k| {
                let mut t = task(10 + k, TaskRole::Rt1, 0, "0-1");
                t.realtime = true;
                t.rt_share = 0.25;
                t
            })
            .collect();
        let mut sut = snapshot(0, cpus, tasks);
        let pass = settle(&mut sut, 10);
        assert_eq!(pass.moves.len(), 4);
        assert_eq!(count_on(&sut, 1, TaskRole::Rt1), 4);
    }

    #[test]
    fn a_non_realtime_rt1_task_swaps_with_a_normal_task_on_an_rt_cpu() {
        let cpus = cpus("NR");
        let tasks = vec![
            task(10, TaskRole::Rt1, 0, "0-1"),
            task(20, TaskRole::Normal, 1, "0-1"),
        ];
        let mut sut = snapshot(0, cpus, tasks);
        let pass = push_rt(&mut sut, HORIZON);
        assert_eq!(pass.moves.len(), 2, "{:?}", pass.moves);
        assert_eq!((pass.moves[0].tid, pass.moves[0].to), (10, 1));
        assert_eq!((pass.moves[1].tid, pass.moves[1].to), (20, 0));
        assert!(pass.moves[0].reason.contains("swapped with normal task 20"));
        assert_eq!((sut.load_of(0), sut.load_of(1)), (1.0, 1.0));
        assert!(settle(&mut sut, 5).moves.is_empty());
    }

    #[test]
    fn a_non_realtime_rt1_task_stays_off_a_busier_rt_cpu_without_a_partner() {
        let cpus = cpus("NR");
        let mut tasks = vec![task(10, TaskRole::Rt1, 0, "0-1")];
        tasks.extend((0..2).map(|k| task(20 + k, TaskRole::Rt1, 1, "0-1")));
        let mut sut = snapshot(0, cpus, tasks);
        assert!(push_rt(&mut sut, HORIZON).moves.is_empty());
        assert!(settle(&mut sut, 5).moves.is_empty(), "2 vs 1 is balanced");
    }

    #[test]
    fn rt0_tasks_never_move_and_count_as_rt_load() {
        let mut rt0 = task(1, TaskRole::Rt0, 1, "0-1");
        rt0.realtime = true;
        rt0.rt_share = 0.9;
        let mut busy = task(2, TaskRole::Rt0, 0, "0-1");
        busy.realtime = false;
        let normals = (0..3).map(|k| task(10 + k, TaskRole::Normal, 0, "0-1"));
        let tasks = [rt0, busy].into_iter().chain(normals).collect();
        let mut sut = snapshot(0, cpus("NR"), tasks);
        let placed = place_all(&mut sut, HORIZON);
        let pushed = settle(&mut sut, 10);
        assert!(
            placed
                .moves
                .iter()
                .chain(&pushed.moves)
                .all(|m| m.tid >= 10)
        );
        assert_eq!(sut.tasks[0].cpu, Some(1));
        assert_eq!(sut.tasks[1].cpu, Some(0));
    }

    #[test]
    fn a_task_is_never_placed_outside_its_allowed_cpus() {
        let cpus = cpus("NNR");
        let tasks = vec![
            task(10, TaskRole::Rt1, 0, "0-1"),
            task(11, TaskRole::Normal, 2, "2"),
            task(12, TaskRole::Normal, 0, "0"),
            task(13, TaskRole::Normal, 0, "0"),
        ];
        let mut sut = snapshot(0, cpus, tasks);
        let placed = place_all(&mut sut, HORIZON);
        let pass = settle(&mut sut, 10);
        for m in placed.moves.iter().chain(&pass.moves) {
            assert!(sut.tasks[m.task].allowed.contains(m.to), "{m:?}");
        }
        assert_eq!(
            sut.tasks[0].cpu,
            Some(1),
            "RT1 allowed on no RT CPU: least loaded NRT"
        );
        assert!(placed.moves[0].reason.contains("no RT CPU allowed"));
        assert_eq!(
            sut.tasks[1].cpu,
            Some(2),
            "normal allowed only on an RT CPU"
        );
    }

    #[test]
    fn reasons_say_why_in_words() {
        let now = 1_000_000_000;
        let mut t = task(10, TaskRole::Rt1, 0, "0-3");
        t.stats = attempting(50_000_000, now, 9_000_000);
        t.realtime = true;
        let cpus = vec![cpu(0, false), cpu(3, true)];
        let mut sut = snapshot(now, cpus.clone(), vec![t.clone()]);
        let pass = push_rt(&mut sut, HORIZON);
        assert_eq!(
            pass.moves[0].reason,
            "rt1 back to RT CPU 3: next attempt predicted in 41 ms"
        );
        t.realtime = false;
        let mut sut = snapshot(now, cpus, vec![t]);
        assert_eq!(
            push_rt(&mut sut, HORIZON).moves[0].reason,
            "rt1 back to RT CPU 3: next attempt predicted in 41 ms; \
             load there with it 1.0, 1.0 at best on an NRT CPU"
        );
        let mut sut = snapshot(
            0,
            vec![cpu(0, false), cpu(2, true)],
            (0..3)
                .map(|k| task(10 + k, TaskRole::Normal, 2, "0-2"))
                .collect(),
        );
        assert_eq!(
            push_one(&mut sut, HORIZON).moves[0].reason,
            "normal off RT CPU 2 to NRT CPU 0: load 3.0 vs 0.0"
        );
        assert_eq!(words(150_000), "150 us");
        assert_eq!(words(4_200_000), "4.2 ms");
        assert_eq!(words(2_500_000_000), "2.5 s");
    }

    // ---- properties ----

    fn arb_snapshot() -> impl Strategy<Value = Snapshot> {
        (2usize..7, 0usize..12)
            .prop_flat_map(|(ncpu, ntask)| {
                let rt_mask = prop::collection::vec(any::<bool>(), ncpu);
                let rt_share = prop::collection::vec(0.0f64..1.0, ncpu);
                let tasks = prop::collection::vec(
                    (
                        prop_oneof![
                            Just(TaskRole::Rt0),
                            Just(TaskRole::Rt1),
                            Just(TaskRole::Normal)
                        ],
                        0..ncpu,
                        prop::collection::vec(any::<bool>(), ncpu),
                        any::<bool>(),
                        any::<bool>(),
                        0.0f64..1.0,
                        any::<bool>(),
                        prop::option::of((1u64..1_000_000_000, 0u64..2_000_000_000)),
                    ),
                    ntask,
                );
                (Just(ncpu), rt_mask, rt_share, tasks)
            })
            .prop_map(|(ncpu, rt_mask, shares, tasks)| {
                let now = 10_000_000_000u64;
                let mut rt_mask = rt_mask;
                // Both sides non-empty, as a partition.
                rt_mask[0] = false;
                rt_mask[ncpu - 1] = true;
                let cpus: Vec<CpuState> = (0..ncpu)
                    .map(|c| CpuState {
                        cpu: c,
                        rt: rt_mask[c],
                        runnable: 0,
                        rt_share: shares[c] * 0.5,
                    })
                    .collect();
                let tasks = tasks
                    .into_iter()
                    .enumerate()
                    .map(
                        |(k, (role, on, mask, realtime, runnable, share, in_section, stats))| {
                            let mut allowed: Vec<usize> = (0..ncpu).filter(|&c| mask[c]).collect();
                            if allowed.is_empty() {
                                allowed.push(on);
                            }
                            TaskState {
                                tid: 100 + k as i32,
                                role,
                                cpu: Some(on),
                                allowed: CpuSet::from_cpus(allowed),
                                realtime,
                                runnable,
                                rt_share: share * 0.3,
                                stats: stats.map_or_else(
                                    MigrationStats::default,
                                    |(period, ago)| {
                                        attempting(period, now, ago.min(now - 5 * period))
                                    },
                                ),
                                in_section,
                            }
                        },
                    )
                    .collect();
                let mut s = snapshot(now, cpus.clone(), tasks);
                for (c, orig) in s.cpus.iter_mut().zip(&cpus) {
                    c.rt_share = (c.rt_share + orig.rt_share).min(1.0);
                }
                s
            })
    }

    fn check_moves(before: &Snapshot, moves: &[Move]) -> Result<(), TestCaseError> {
        for m in moves {
            let t = &before.tasks[m.task];
            prop_assert_eq!(t.tid, m.tid);
            prop_assert!(t.role != TaskRole::Rt0, "an RT0 task moved: {:?}", m);
            prop_assert!(t.allowed.contains(m.to), "outside allowed: {:?}", m);
            if before.is_rt(m.to) {
                prop_assert!(!t.in_section, "onto an RT CPU inside a section: {:?}", m);
                prop_assert!(
                    t.stats.may_return(before.now_ns, HORIZON),
                    "onto an RT CPU against the anti ping-pong rule: {:?}",
                    m
                );
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn passes_never_move_rt0_never_leave_allowed_never_enter_rt_in_a_section(
            start in arb_snapshot(),
            order in prop::collection::vec(0u8..3, 1..12),
        ) {
            let mut sut = start.clone();
            let placed = place_all(&mut sut, HORIZON);
            check_moves(&start, &placed.moves)?;
            for step in order {
                let before = sut.clone();
                let pass = match step {
                    0 => push_rt(&mut sut, HORIZON),
                    1 => push_one(&mut sut, HORIZON),
                    _ => place_all(&mut sut, HORIZON),
                };
                check_moves(&before, &pass.moves)?;
                prop_assert!(step != 1 || pass.moves.len() <= 1);
            }
            for (a, b) in start.tasks.iter().zip(&sut.tasks) {
                if a.role == TaskRole::Rt0 {
                    prop_assert_eq!(a.cpu, b.cpu);
                }
            }
            for c in &sut.cpus {
                prop_assert!((0.0..=1.0).contains(&c.rt_share));
            }
        }

        #[test]
        fn a_push_never_raises_the_higher_of_the_two_loads(start in arb_snapshot()) {
            let mut sut = start.clone();
            let pass = push_one(&mut sut, HORIZON);
            if let Some(m) = pass.moves.first() {
                let from = m.from.unwrap();
                let before = start.load_of(from).max(start.load_of(m.to));
                let after = sut.load_of(from).max(sut.load_of(m.to));
                prop_assert!(after < before, "{} -> {}: {:?}", before, after, m);
            }
        }
    }
}

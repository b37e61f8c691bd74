//! Claims: what this host's subsystems write, served to the others on `claims/H`, and
//! the other hosts' claims learned in the background and judged ([`crate::guard`]).

use super::*;

impl ZenohLink {
    /// This host's claims, served on `claims/H` to the others: per cell written, by
    /// name, its byte ranges.
    pub(super) fn serve_claims(
        &mut self,
        cells: &Cells,
        writes: &[(usize, Vec<Range<usize>>)],
    ) -> Result<(), String> {
        let claims: BTreeMap<String, Vec<[usize; 2]>> = writes
            .iter()
            .map(|(c, ranges)| {
                (
                    cells.table().cells()[*c].name().to_string(),
                    ranges.iter().map(|r| [r.start, r.end]).collect(),
                )
            })
            .collect();
        let json = serde_json::to_vec(&claims).map_err(zerr)?;
        let layout = serde_json::to_vec(&layout_json(
            &self.run,
            &self.hosts,
            self.tick_period,
            cells.table(),
        ))
        .map_err(zerr)?;
        let q = self
            .session
            .declare_queryable(self.key(&format!("claims/{}", self.hosts[self.host])))
            .callback(move |query| {
                let _ = query.reply(query.key_expr().clone(), json.clone()).wait();
            })
            .wait()
            .map_err(zerr)?;
        let l = self
            .session
            .declare_queryable(self.key("layout"))
            .callback(move |query| {
                let _ = query.reply(query.key_expr().clone(), layout.clone()).wait();
            })
            .wait()
            .map_err(zerr)?;
        self.queryables.extend([q, l]);
        Ok(())
    }

    /// Learns every other writing host's claims in the background (its own are
    /// known): a thread asks each on its `claims/H` until it answers (the link to a
    /// host may come up after the run started); meanwhile that host's publications
    /// are held, and checked and copied when its claims come. Claims that do not
    /// read leave them held: counted as refused at the end.
    pub(super) fn learn_claims(&mut self) -> Result<(), String> {
        let Some(intake) = self.intake.clone() else {
            return Ok(());
        };
        let mut own: Claims = vec![Vec::new(); intake.cells.len()];
        for (c, ranges) in &intake.ours {
            own[*c] = ranges.clone();
        }
        let _ = self
            .guard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_claims(self.host, own);
        let mut missing: Vec<(usize, String)> = self
            .writers
            .iter()
            .copied()
            .filter(|&h| h != self.host)
            .map(|h| (h, self.key(&format!("claims/{}", self.hosts[h]))))
            .collect();
        let session = self.session.clone();
        let quit = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&quit);
        let handle = std::thread::Builder::new()
            .name("ictus-claims".into())
            .spawn(move || {
                // Relaxed: a stop request, polled.
                while !missing.is_empty() && !stop.load(Ordering::Relaxed) {
                    missing.retain(|(h, key)| {
                        let reply = session
                            .get(key)
                            .timeout(Duration::from_millis(300))
                            .wait()
                            .ok()
                            .and_then(|r| r.recv().ok());
                        let Some(sample) = reply.and_then(|r| r.result().ok().cloned()) else {
                            return true;
                        };
                        let Ok(claims) = read_claims(&sample.payload().to_bytes(), &intake.cells)
                        else {
                            return false;
                        };
                        let held = intake
                            .guard
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .set_claims(*h, claims);
                        let now = monotonic_now();
                        for (cell, bytes) in held {
                            let _ = intake.take(cell, *h, &bytes, now, None);
                        }
                        false
                    });
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
            .map_err(zerr)?;
        self.claims_thread = Some((handle, quit));
        Ok(())
    }
}

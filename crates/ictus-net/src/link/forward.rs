//! The forwarder: the thread that sleeps on the cells' notice and publishes what
//! changed, never waiting on a peer.

use super::*;

impl ZenohLink {
    /// Starts the forwarder: sleeps on the cells' notice, publishes what changed.
    pub(super) fn forward(
        &mut self,
        cells: &Cells,
        writes: &[(usize, Vec<Range<usize>>)],
    ) -> Result<(), String> {
        self.view = Some(View::start(
            &self.session,
            &self.run,
            &self.hosts[self.host],
            self.host as u16,
            cells,
            writes,
            Arc::clone(&self.offset_ns),
            (self.host == 0).then(|| Arc::clone(&self.latest_tick)),
        )?);
        let mut publishers = Vec::new();
        for (cell, _) in writes {
            let name = cells.table().cells()[*cell].name().to_string();
            let p = self
                .session
                .declare_publisher(self.key(&format!("cell/{name}/{}", self.hosts[self.host])))
                // Latest value wins (the default): a publication a peer's full queue
                // cannot take is dropped for that peer (its receivers count the gap),
                // never waited for.
                .congestion_control(self.options.congestion)
                .priority(self.options.cells)
                .express(self.options.express)
                // In QUIC datagrams where the links carry them (`quic=mixed`): a lost
                // one is never retransmitted, the next frame's copy follows.
                .reliability(if self.options.quic.best_effort_cells() {
                    zenoh::qos::Reliability::BestEffort
                } else {
                    zenoh::qos::Reliability::Reliable
                })
                .wait()
                .map_err(zerr)?;
            publishers.push(p);
        }
        let cells = cells.clone();
        let writes = writes.to_vec();
        let quit = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&quit);
        let counts = Arc::clone(&self.counts);
        let host = self.host as u16;
        let offset = Arc::clone(&self.offset_ns);
        let delays = Arc::clone(&self.forward_delay);
        let stages = Arc::clone(&self.stages);
        cells.listen();
        let handle = std::thread::Builder::new()
            .name("ictus-forward".into())
            .spawn(move || {
                first_among_normal_threads();
                let mut delay = LatencyHistogram::new();
                let mut sending = Stages::new();
                let mut last = vec![u64::MAX; writes.len()];
                let mut numbers = vec![0u64; writes.len()];
                let mut bufs: Vec<Vec<u8>> =
                    writes.iter().map(|(c, _)| cells.new_buffer(*c)).collect();
                let mut out = Vec::new();
                loop {
                    // Relaxed: a stop request, polled; one more scan follows it.
                    let ending = stop.load(Ordering::Relaxed);
                    let (seen, stamp) = cells.notice();
                    let awake = monotonic_now();
                    for (i, (cell, ranges)) in writes.iter().enumerate() {
                        if cells.sequence(*cell) == last[i] {
                            continue;
                        }
                        let Some(seq) = cells.try_read_cell(*cell, &mut bufs[i]) else {
                            continue;
                        };
                        last[i] = seq;
                        let p = Publication::of(
                            host,
                            // Relaxed: set once before cells flow.
                            offset.load(Ordering::Relaxed) as i64,
                            stamp.as_u64(),
                            &bufs[i],
                            ranges,
                        );
                        out.clear();
                        p.encode(&mut out);
                        let encoded = monotonic_now();
                        numbers[i] += 1;
                        let attachment = Attachment {
                            handed: encoded.as_u64(),
                            number: numbers[i],
                        };
                        let put = publishers[i]
                            .put(out.clone())
                            .attachment(attachment.encode().to_vec())
                            .wait();
                        let returned = monotonic_now();
                        if put.is_ok() {
                            // Relaxed: counters.
                            counts.sent.fetch_add(1, Ordering::Relaxed);
                            counts.bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
                        }
                        if stamp.as_u64() != 0 {
                            delay.record(encoded.saturating_sub(stamp));
                            sending.record(LinkStage::Wake, awake.saturating_sub(stamp));
                            sending.record(LinkStage::Encode, encoded.saturating_sub(awake));
                            sending.record(LinkStage::Put, returned.saturating_sub(encoded));
                        }
                    }
                    if ending {
                        break;
                    }
                    cells.wait_notice(seen, FORWARD_NAP);
                }
                *delays.lock().unwrap_or_else(|e| e.into_inner()) = delay;
                stages
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .merge_sending(sending);
            })
            .map_err(zerr)?;
        self.forwarder = Some((handle, quit));
        Ok(())
    }
}

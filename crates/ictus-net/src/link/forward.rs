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
        let publishers = self.cell_publishers(cells, writes)?;
        let forwarder = Forwarder::new(self, cells, writes, publishers);
        let quit = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&quit);
        let delays = Arc::clone(&self.forward_delay);
        let stages = Arc::clone(&self.stages);
        cells.listen();
        let handle = std::thread::Builder::new()
            .name("ictus-forward".into())
            .spawn(move || {
                first_among_normal_threads();
                let (delay, sending) = forwarder.run(&stop);
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

    /// A publisher for each cell of `writes`, under this host's name.
    fn cell_publishers(
        &self,
        cells: &Cells,
        writes: &[(usize, Vec<Range<usize>>)],
    ) -> Result<Vec<zenoh::pubsub::Publisher<'static>>, String> {
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
        Ok(publishers)
    }
}

/// The forwarder thread's state: the cells it publishes, with their last sequence
/// and publication number, and what it measures.
struct Forwarder {
    cells: Cells,
    writes: Vec<(usize, Vec<Range<usize>>)>,
    publishers: Vec<zenoh::pubsub::Publisher<'static>>,
    counts: Arc<CellCounts>,
    host: u16,
    offset: Arc<AtomicU64>,
    delay: LatencyHistogram,
    sending: Stages,
    last: Vec<u64>,
    numbers: Vec<u64>,
    bufs: Vec<Vec<u8>>,
    out: Vec<u8>,
}

impl Forwarder {
    fn new(
        link: &ZenohLink,
        cells: &Cells,
        writes: &[(usize, Vec<Range<usize>>)],
        publishers: Vec<zenoh::pubsub::Publisher<'static>>,
    ) -> Forwarder {
        Forwarder {
            cells: cells.clone(),
            writes: writes.to_vec(),
            publishers,
            counts: Arc::clone(&link.counts),
            host: link.host as u16,
            offset: Arc::clone(&link.offset_ns),
            delay: LatencyHistogram::new(),
            sending: Stages::new(),
            last: vec![u64::MAX; writes.len()],
            numbers: vec![0u64; writes.len()],
            bufs: writes.iter().map(|(c, _)| cells.new_buffer(*c)).collect(),
            out: Vec::new(),
        }
    }

    /// Publishes what changed at each notice until `stop` (one more scan after it),
    /// and gives back the delays and stages it measured.
    fn run(mut self, stop: &AtomicBool) -> (LatencyHistogram, Stages) {
        loop {
            // Relaxed: a stop request, polled; one more scan follows it.
            let ending = stop.load(Ordering::Relaxed);
            let (seen, stamp) = self.cells.notice();
            let awake = monotonic_now();
            for i in 0..self.writes.len() {
                self.send_if_changed(i, stamp, awake);
            }
            if ending {
                break;
            }
            self.cells.wait_notice(seen, FORWARD_NAP);
        }
        (self.delay, self.sending)
    }

    /// Publishes the `i`th written cell if it changed, with the notice's `stamp`
    /// (the forwarder woke at `awake`).
    fn send_if_changed(&mut self, i: usize, stamp: Nanos, awake: Nanos) {
        let (cell, ranges) = &self.writes[i];
        if self.cells.sequence(*cell) == self.last[i] {
            return;
        }
        let Some(seq) = self.cells.try_read_cell(*cell, &mut self.bufs[i]) else {
            return;
        };
        self.last[i] = seq;
        let p = Publication::of(
            self.host,
            // Relaxed: set once before cells flow.
            self.offset.load(Ordering::Relaxed) as i64,
            stamp.as_u64(),
            &self.bufs[i],
            ranges,
        );
        self.out.clear();
        p.encode(&mut self.out);
        let encoded = monotonic_now();
        self.numbers[i] += 1;
        let attachment = Attachment {
            handed: encoded.as_u64(),
            number: self.numbers[i],
        };
        let put = self.publishers[i]
            .put(self.out.clone())
            .attachment(attachment.encode().to_vec())
            .wait();
        let returned = monotonic_now();
        if put.is_ok() {
            // Relaxed: counters.
            self.counts.sent.fetch_add(1, Ordering::Relaxed);
            self.counts
                .bytes
                .fetch_add(self.out.len() as u64, Ordering::Relaxed);
        }
        if stamp.as_u64() != 0 {
            self.delay.record(encoded.saturating_sub(stamp));
            self.sending
                .record(LinkStage::Wake, awake.saturating_sub(stamp));
            self.sending
                .record(LinkStage::Encode, encoded.saturating_sub(awake));
            self.sending
                .record(LinkStage::Put, returned.saturating_sub(encoded));
        }
    }
}

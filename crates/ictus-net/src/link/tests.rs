use super::*;

#[test]
fn a_publication_reads_back_and_anything_cut_or_longer_is_refused() {
    let data = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
    let p = Publication {
        host: 2,
        offset: -1234,
        stamp: 987_654_321,
        ranges: vec![(0, &data[..4]), (16, &data[4..])],
    };
    let mut out = Vec::new();
    p.encode(&mut out);
    let back = Publication::decode(&out).unwrap();
    assert_eq!(
        (back.host, back.offset, back.stamp),
        (2, -1234, 987_654_321)
    );
    assert_eq!(back.ranges, p.ranges);
    for cut in 0..out.len() {
        assert!(Publication::decode(&out[..cut]).is_none(), "cut at {cut}");
    }
    out.push(0);
    assert!(Publication::decode(&out).is_none());
}

#[test]
fn a_publication_s_bytes_are_laid_out_as_docs_wire_md_says() {
    let bytes = publication_bytes(2, -1, 7, &[(16, &[0xaa, 0xbb])]);
    let mut expected = Vec::new();
    expected.extend_from_slice(&2u16.to_le_bytes()); // host
    expected.extend_from_slice(&(-1i64).to_le_bytes()); // clock offset
    expected.extend_from_slice(&7u64.to_le_bytes()); // stamp
    expected.extend_from_slice(&1u16.to_le_bytes()); // ranges
    expected.extend_from_slice(&16u32.to_le_bytes()); // the range's offset in the cell
    expected.extend_from_slice(&2u32.to_le_bytes()); // its length
    expected.extend_from_slice(&[0xaa, 0xbb]);
    assert_eq!(bytes, expected);
}

#[test]
fn a_stage_figure_per_stage_measured_in_the_order_a_publication_passes_them() {
    let mut sut = Stages::new();
    sut.record(LinkStage::Copy, Nanos::new(5));
    sut.record(LinkStage::Wake, Nanos::new(7));
    let mut sending = Stages::new();
    sending.record(LinkStage::Put, Nanos::new(3));
    sending.record(LinkStage::Put, Nanos::new(4));
    sending.record(LinkStage::Transit, Nanos::new(9));
    sut.merge_sending(sending);
    let got: Vec<(LinkStage, u64)> = sut
        .figures()
        .iter()
        .map(|f| (f.stage, f.delay.summary.count))
        .collect();
    // The forwarder's sending stages replace the shared ones; its receiving
    // ones are not its to give.
    assert_eq!(got, [(LinkStage::Put, 2), (LinkStage::Copy, 1)]);
}

#[test]
fn the_attachment_reads_back_and_another_size_is_none() {
    let a = Attachment {
        handed: 987_654_321,
        number: 12,
    };
    assert_eq!(
        Attachment::decode(&a.encode()),
        (Some(987_654_321), Some(12))
    );
    assert_eq!(Attachment::decode(&[1, 2, 3]), (None, None));
}

#[test]
fn a_nodes_new_explained_misses_are_those_after_the_last_handed_over_in_words() {
    use ictus_exec::live::LiveMiss;
    use ictus_explain::MissKind;
    let miss = |frame: u64, kind: MissKind| LiveMiss {
        subsystem: "B".into(),
        frame,
        kind,
        lateness_ns: 2_300_000,
        missed: u64::from(kind == MissKind::Missed),
        cause: "preempted by burner".into(),
    };
    let (a, b, c) = (
        miss(10, MissKind::Late),
        miss(20, MissKind::Missed),
        miss(30, MissKind::Overrun),
    );
    let first = [a.clone(), b.clone()];
    assert_eq!(new_since(&[], &first), &first[..]);
    assert!(new_since(&first, &first).is_empty());
    let later = [a.clone(), b.clone(), c.clone()];
    assert_eq!(new_since(&first, &later), &later[2..]);
    // The ones handed over fell out of the window: all are new.
    let much_later = [c.clone()];
    assert_eq!(new_since(&first, &much_later), &much_later[..]);
    assert_eq!(
        miss_words(&a),
        "B released 2.30 ms late at frame 10: preempted by burner"
    );
    assert_eq!(
        miss_words(&b),
        "B released 2.30 ms late at frame 20, 1 release(s) skipped: preempted by burner"
    );
    assert_eq!(
        miss_words(&c),
        "B overran at frame 30, 2.30 ms past the next release: preempted by burner"
    );
}

//! What each fragment does to the record being assembled, and a record's last steps:
//! inflating a compressed record, RocksDB's metadata records, the size limit.

use super::*;

impl LogDecoder {
    /// A complete fragment whose checksum matched (or was not checked).
    pub(super) fn fragment(
        &mut self,
        src: &mut BytesMut,
        fragment_offset: u64,
        fragment: Fragment,
    ) -> Result<Option<Bytes>, CodecError> {
        let fragment_len = fragment.len();
        let recyclable = fragment.log_number().is_some();
        if recyclable && !self.state.is_recycled() && self.rules.dialect() == Dialect::Pebble {
            // Pebble's reader takes legacy and recyclable fragments alike.
            self.state.set_recycled(fragment.synced_offset().is_some());
        } else if recyclable && !self.state.is_recycled() {
            self.consume(src, fragment_len);
            self.unexpected_recyclable(fragment_offset, fragment_len)?;
            return Ok(None);
        }
        // Advancing the frozen view is a pointer bump; advancing the BytesMut
        // is not inlined.
        let mut payload = src.split_to(fragment_len).freeze();
        payload.advance(fragment.header_len());
        self.offset += fragment_len as u64;
        self.stats.fragments += 1;

        let type_byte = fragment.type_byte();
        let part = match fragment.fragment_type() {
            Some(fragment_type) => match fragment_type.part() {
                Some(part) => part,
                None if fragment_type == FragmentType::Zero => {
                    self.unknown_type(fragment_offset, type_byte, payload.len())?;
                    return Ok(None);
                }
                None => {
                    self.metadata_record(fragment_offset, fragment_type, &payload)?;
                    return Ok(None);
                }
            },
            None if fragment.is_ignorable() => {
                // RocksDB: a type with bit 7 set is one a newer writer may add and
                // older readers skip; it still cuts a record open around it.
                self.stats.ignored_fragments += 1;
                if let Some(cut) = self.abandon_assembly() {
                    self.corrupt(cut)?;
                }
                return Ok(None);
            }
            None => {
                self.unknown_type(fragment_offset, type_byte, payload.len())?;
                return Ok(None);
            }
        };
        if !recyclable {
            self.state.legacy_data = true;
        }
        self.state.data_seen = true;

        if fragment_offset < self.start_offset {
            return Ok(None);
        }
        if self.resyncing {
            match part {
                Part::Middle | Part::Last => return Ok(None),
                _ => self.resyncing = false,
            }
        }
        if matches!(part, Part::Full | Part::First) && fragment_offset >= self.end_offset {
            self.assembly = Assembly::Idle;
            self.flow = Flow::Halted {
                at: fragment_offset,
            };
            return Ok(None);
        }
        let fragments = self.fragments;

        match part {
            Part::Full => {
                if !matches!(self.assembly, Assembly::Idle) {
                    self.interrupt_assembly()?;
                    if self.flow != Flow::Reading {
                        return Ok(None);
                    }
                }
                if payload.len() > self.raw_record_limit() {
                    self.corrupt(Corruption::new(
                        fragment_offset,
                        payload.len() as u64,
                        CorruptionKind::RecordTooLarge,
                    ))?;
                    return Ok(None);
                }
                return self.complete_record(fragment_offset, payload);
            }
            Part::First => {
                self.interrupt_assembly()?;
                if self.flow != Flow::Reading {
                    return Ok(None);
                }
                let mut parts = Parts::default();
                let handed = if fragments {
                    // Handed out, not kept: the open record is only counted.
                    parts.len = payload.len();
                    Some(payload)
                } else {
                    parts.push(payload);
                    None
                };
                self.assembly = Assembly::Collecting {
                    start: fragment_offset,
                    parts,
                };
                self.check_record_size()?;
                if let (Some(payload), Assembly::Collecting { .. }) = (handed, &self.assembly) {
                    let Some(payload) =
                        self.inflate_fragment(fragment_offset, payload, (true, false))?
                    else {
                        return Ok(None);
                    };
                    self.mark = FragmentMark::Begin {
                        start: fragment_offset,
                    };
                    return Ok(Some(payload));
                }
            }
            Part::Middle | Part::Last => {
                let last = part == Part::Last;
                match &mut self.assembly {
                    Assembly::Idle => {
                        self.corrupt(Corruption::new(
                            fragment_offset,
                            payload.len() as u64,
                            CorruptionKind::MissingStart,
                        ))?;
                    }
                    Assembly::Discarding { dropped, .. } => {
                        *dropped += payload.len() as u64;
                        if last {
                            self.interrupt_assembly()?;
                        }
                    }
                    Assembly::Collecting { parts, .. } if fragments => {
                        parts.len += payload.len();
                        let len = parts.len;
                        self.check_record_size()?;
                        if let Assembly::Collecting { start, .. } = self.assembly {
                            let stored_len = payload.len();
                            let Some(payload) =
                                self.inflate_fragment(start, payload, (false, last))?
                            else {
                                return Ok(None);
                            };
                            if !last {
                                self.mark = FragmentMark::Middle;
                                return Ok(Some(payload));
                            }
                            self.assembly = Assembly::Idle;
                            self.mark = FragmentMark::End;
                            // The record's earlier fragments count too (as stored,
                            // in a compressed log).
                            self.stats.record_bytes += (len - stored_len) as u64;
                            return Ok(Some(self.finish_record(start, payload)));
                        }
                        if last {
                            self.interrupt_assembly()?;
                        }
                    }
                    Assembly::Collecting { parts, .. } => {
                        parts.push(payload);
                        self.check_record_size()?;
                        if last {
                            match std::mem::replace(&mut self.assembly, Assembly::Idle) {
                                Assembly::Collecting { start, parts } => {
                                    return self.complete_record(start, parts.join());
                                }
                                Assembly::Discarding { start, dropped } => {
                                    self.corrupt(Corruption::new(
                                        start,
                                        dropped,
                                        CorruptionKind::RecordTooLarge,
                                    ))?;
                                }
                                Assembly::Idle => {}
                            }
                        }
                    }
                }
            }
        }
        Ok(None)
    }

    /// The largest raw record: `max_record_bytes`, with room for what zstd adds to
    /// an incompressible record when records are compressed (its inflated size is
    /// checked against the limit itself).
    pub(super) fn raw_record_limit(&self) -> usize {
        if self.state.is_compressed() {
            let max = self.max_record_bytes;
            max.saturating_add(max / 128).saturating_add(128)
        } else {
            self.max_record_bytes
        }
    }

    /// A record's bytes are all in, from `start`: returns it, inflated if the log
    /// is compressed (a record that does not inflate is damage).
    pub(super) fn complete_record(
        &mut self,
        start: u64,
        raw: Bytes,
    ) -> Result<Option<Bytes>, CodecError> {
        let Some(compression) = self
            .state
            .compression
            .filter(|_| self.state.is_compressed())
        else {
            return Ok(Some(self.finish_record(start, raw)));
        };
        if raw.is_empty() {
            // RocksDB writes an empty record as an empty fragment, no frame.
            return Ok(Some(self.finish_record(start, raw)));
        }
        match self
            .state
            .inflater
            .inflate(compression, &raw, self.max_record_bytes)
        {
            Ok(record) => Ok(Some(self.finish_record(start, Bytes::from(record)))),
            Err(failure) => {
                self.note_cut(start, failure.kind);
                let bytes = failure.bytes.unwrap_or(raw.len() as u64);
                if failure.kind == CorruptionKind::RecordTooLarge {
                    self.corrupt(Corruption::new(start, bytes, failure.kind))?;
                } else {
                    self.corrupt(Corruption::with_reason(
                        start,
                        bytes,
                        failure.kind,
                        failure.reason,
                    ))?;
                }
                Ok(None)
            }
        }
    }

    /// Fragment mode in a compressed log: the inflated bytes of `payload`, a
    /// fragment (beginning and/or ending it, as `parts` says) of the record open at
    /// `start`; `None` once a record that does not inflate is handled as damage.
    pub(super) fn inflate_fragment(
        &mut self,
        start: u64,
        payload: Bytes,
        parts: (bool, bool),
    ) -> Result<Option<Bytes>, CodecError> {
        let Some(compression) = self
            .state
            .compression
            .filter(|_| self.state.is_compressed())
        else {
            return Ok(Some(payload));
        };
        match self
            .state
            .inflater
            .inflate_piece(compression, &payload, parts, self.max_record_bytes)
        {
            Ok(inflated) => Ok(Some(Bytes::from(inflated))),
            Err(failure) => {
                self.assembly = Assembly::Idle;
                self.note_cut(start, failure.kind);
                let bytes = failure.bytes.unwrap_or(payload.len() as u64);
                self.corrupt(Corruption::with_reason(
                    start,
                    bytes,
                    failure.kind,
                    failure.reason,
                ))?;
                Ok(None)
            }
        }
    }

    /// RocksDB: a metadata record (type 9, 10, 11, 130 or 131) at `at`: kept,
    /// handed to the callback, never returned.
    pub(super) fn metadata_record(
        &mut self,
        at: u64,
        fragment_type: FragmentType,
        payload: &[u8],
    ) -> Result<(), CodecError> {
        self.stats.metadata_records += 1;
        if let Assembly::Collecting { start, parts } =
            std::mem::replace(&mut self.assembly, Assembly::Idle)
        {
            self.note_cut(start, CorruptionKind::MetadataInRecord);
            self.corrupt(Corruption::new(
                start,
                parts.len as u64,
                CorruptionKind::MetadataInRecord,
            ))?;
        }
        let type_byte = fragment_type.as_u8();
        let parsed = match fragment_type {
            FragmentType::SetCompressionType => {
                WalCompressionType::parse(payload).map(MetadataRecord::Compression)
            }
            FragmentType::PredecessorWalInfo | FragmentType::RecyclablePredecessorWalInfo => {
                PredecessorWalInfo::parse(payload).map(MetadataRecord::PredecessorWal)
            }
            _ => TimestampSizes::parse(payload)
                .map(|sizes| MetadataRecord::TimestampSizes(sizes.iter().collect())),
        };
        let record = match parsed {
            Ok(record) => record,
            Err(error) => {
                let kind = CorruptionKind::BadMetadataRecord(type_byte);
                return self.corrupt(Corruption::with_reason(
                    at,
                    payload.len() as u64,
                    kind,
                    format!("{kind}: {error}"),
                ));
            }
        };
        let late = matches!(record, MetadataRecord::Compression(_))
            && (self.state.compression.is_some() || self.data_seen());
        self.state.apply(&record);
        self.settled = self.offset;
        if let Some(callback) = &self.metadata {
            let mut callback = callback
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            callback(at, &record);
        }
        if late {
            self.corrupt(Corruption::new(
                at,
                payload.len() as u64,
                CorruptionKind::LateCompressionType,
            ))?;
        }
        if let MetadataRecord::Compression(compression) = record {
            if !compression.is_supported() {
                self.corrupt(Corruption::new(
                    at,
                    payload.len() as u64,
                    CorruptionKind::UnsupportedCompression(compression.as_u32()),
                ))?;
            }
        }
        Ok(())
    }

    /// Switches an open record that crossed `max_record_bytes` to discarding.
    pub(super) fn check_record_size(&mut self) -> Result<(), CodecError> {
        if let Assembly::Collecting { start, ref parts } = self.assembly {
            let len = parts.len;
            if len > self.max_record_bytes {
                self.note_cut(start, CorruptionKind::RecordTooLarge);
                if self.recovery == Recovery::SkipCorrupted {
                    // Reported once the record ends, with everything it dropped.
                    self.assembly = Assembly::Discarding {
                        start,
                        dropped: len as u64,
                    };
                } else {
                    self.assembly = Assembly::Idle;
                    self.corrupt(Corruption::new(
                        start,
                        len as u64,
                        CorruptionKind::RecordTooLarge,
                    ))?;
                }
            }
        }
        Ok(())
    }
}

import Foundation

/// The records a pending chain committed that are not yet written in place
/// (Keys/file-format.md §8.2, "Chained commits"), by index, the newest of each: where each
/// lies in the chain's journal file, which holds them durably already. Reads see them laid
/// over the file's bytes; ``CommittedFile`` writes them in place once, before the header that
/// ends the chain, so a record that several commits of a chain rewrite (SQLite's WAL regrowing
/// its last page) is written in place once, and one that a shrink cuts off (SQLite starting
/// its WAL over) never. They are sealed records: ciphertext, like what the file holds; none is
/// kept in memory.
struct PendingRecords {
    /// Where a record lies in the journal file.
    struct Location: Equatable {
        var offset: Int64
        var count: Int
    }

    /// Reads `count` bytes at `offset` of the journal file.
    typealias Reader = (_ offset: Int64, _ count: Int) throws(DataProtectionError) -> Data

    private var records: [UInt64: Location] = [:]
    /// Their bytes, in all.
    private(set) var byteCount = 0

    var isEmpty: Bool { records.isEmpty }

    /// Keeps the record at `location` for `index`, in place of an older one.
    mutating func keep(_ location: Location, at index: UInt64) {
        byteCount += location.count - (records.updateValue(location, forKey: index)?.count ?? 0)
    }

    /// Forgets the records from `index` on (a shrink cut them off: no reader needs them).
    mutating func drop(from index: UInt64) {
        for (key, location) in records where key >= index {
            records[key] = nil
            byteCount -= location.count
        }
    }

    /// The `count` bytes at `offset` of a file laid out by `header`, as the committed state has
    /// them: what a pending record covers read from the journal (`journal`), the rest from the
    /// file (`file`), one read per stretch of either: a chunk read while its record is pending
    /// touches the journal alone, a run of chunks the file only for those not pending. A record
    /// not yet on disk at all (past the physical end) extends the file's bytes; the result ends
    /// where the bytes stop in a row (the file's end, with no record right after it).
    func read(at offset: Int64, count: Int, header: FileHeader, journal: Reader, file: Reader) throws(DataProtectionError) -> Data {
        guard !records.isEmpty, count > 0 else { return try file(offset, count) }
        let stride = Int64(header.recordStride), base = header.recordOffset(0)
        let end = offset + Int64(count)
        var result = Data(capacity: count)
        var position = offset
        var fileFrom: Int64?  // where the stretch to read from the file starts
        /// Reads the file's stretch up to `to`; `false` when the file ends before it.
        func readFile(to: Int64) throws(DataProtectionError) -> Bool {
            guard let from = fileFrom, from < to else { return true }
            fileFrom = nil
            let bytes = try file(from, Int(to - from))
            result.append(bytes)
            return bytes.count == Int(to - from)
        }
        while position < end {
            let index = position >= base ? UInt64((position - base) / stride) : nil
            let start = index.map { header.recordOffset($0) } ?? base
            if let index, let location = records[index], position - start < Int64(location.count) {
                guard try readFile(to: position) else { return result }
                let to = min(start + Int64(location.count), end)
                let piece = try journal(location.offset + (position - start), Int(to - position))
                guard piece.count == Int(to - position) else {
                    throw .integrity("The file's journal is shorter than the records it committed: it was truncated.")
                }
                result.append(piece)
                position = to
            } else {
                if fileFrom == nil { fileFrom = position }
                position = min(end, index == nil ? base : start + stride)
            }
        }
        _ = try readFile(to: end)
        return result
    }

    /// Hands the records (read through `read`) to `write` in index order, each run of
    /// consecutive whole records (`stride` bytes each but the run's last, so its bytes lie in a
    /// row on disk) as one piece of at most ``runByteLimit`` bytes with the index of its first:
    /// one `pwrite` per run, not per record (a chain of SQLite WAL commits leaves hundreds in a
    /// row). Each run's records are forgotten once it is written: after a failure the records
    /// not yet written are kept.
    mutating func write(
        stride: Int, read: Reader, _ write: (UInt64, Data) throws(DataProtectionError) -> Void
    ) throws(DataProtectionError) {
        let sorted = records.sorted { $0.key < $1.key }
        var next = 0
        while next < sorted.count {
            var end = next + 1
            var runBytes = sorted[next].value.count
            while end < sorted.count, sorted[end].key == sorted[end - 1].key + 1, sorted[end - 1].value.count == stride,
                  runBytes + sorted[end].value.count <= Self.runByteLimit {
                runBytes += sorted[end].value.count
                end += 1
            }
            let run = sorted[next..<end]
            var bytes = Data(capacity: runBytes)
            for (_, location) in run {
                let record = try read(location.offset, location.count)
                guard record.count == location.count else {
                    throw .integrity("The file's journal is shorter than the records it committed: it was truncated.")
                }
                bytes.append(record)
            }
            try write(run[next].key, bytes)
            for (index, location) in run {
                records[index] = nil
                byteCount -= location.count
            }
            next = end
        }
    }

    /// The most bytes written by one call of ``write(stride:read:_:)``'s `write`.
    static let runByteLimit = 1 << 20

    mutating func removeAll() {
        records.removeAll()
        byteCount = 0
    }
}

import Foundation

/// The records a pending chain committed that are not yet written in place
/// (Keys/file-format.md §8.2, "Chained commits"), by index, the newest of each. Reads see
/// them laid over the file's bytes; ``CommittedFile`` writes them in place once, before the
/// header that ends the chain (or when they pass its byte limit), so a record that several
/// commits of a chain rewrite (SQLite's WAL regrowing its last page) is written once. They are
/// sealed records: ciphertext, like what the file holds.
struct PendingRecords {
    private var records: [UInt64: Data] = [:]
    /// Their bytes, in all.
    private(set) var byteCount = 0

    var isEmpty: Bool { records.isEmpty }

    /// Keeps `record` for `index`, in place of an older one.
    mutating func keep(_ record: Data, at index: UInt64) {
        byteCount += record.count - (records.updateValue(record, forKey: index)?.count ?? 0)
    }

    /// `data`, read from `offset` of a file laid out by `header` for a request of `count` bytes,
    /// with the records laid over it. A record not yet on disk at all (past the physical end)
    /// extends it, as far as records cover it in a row from where the file's bytes end.
    func overlay(_ data: Data, at offset: Int64, count: Int, header: FileHeader) -> Data {
        guard !records.isEmpty, count > 0 else { return data }
        var data = data
        let stride = Int64(header.recordStride), base = header.recordOffset(0)
        let end = offset + Int64(count)
        let first = UInt64(max(0, offset - base) / stride), last = UInt64(max(0, end - 1 - base) / stride)
        guard last >= first else { return data }
        var covered = data.count  // in a row from the start of the request
        for index in first...last {
            guard let record = records[index] else { continue }
            let start = header.recordOffset(index)
            let from = max(start, offset), to = min(start + Int64(record.count), end)
            guard from < to else { continue }
            if Int(to - offset) > data.count { data.append(Data(count: Int(to - offset) - data.count)) }
            data.replaceSubrange(Int(from - offset)..<Int(to - offset), with: record[Int(from - start)..<Int(to - start)])
            if Int(from - offset) <= covered { covered = max(covered, Int(to - offset)) }
        }
        return data.prefix(covered)
    }

    /// Hands the records to `write` in index order, each run of consecutive whole records
    /// (`stride` bytes each but the run's last, so its bytes lie in a row on disk) as one piece
    /// of at most ``runByteLimit`` bytes with the index of its first: one `pwrite` per run, not
    /// per record (a chain of SQLite WAL commits leaves hundreds in a row). Each run's records
    /// are forgotten once it is written: after a failure the records not yet written are kept.
    mutating func write(stride: Int, _ write: (UInt64, Data) throws(DataProtectionError) -> Void) throws(DataProtectionError) {
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
            try write(run[next].key, run.count == 1 ? run[next].value : run.reduce(into: Data(capacity: runBytes)) { $0.append($1.value) })
            for (index, record) in run {
                records[index] = nil
                byteCount -= record.count
            }
            next = end
        }
    }

    /// The most bytes written by one call of ``write(stride:_:)``'s `write`.
    static let runByteLimit = 1 << 20

    mutating func removeAll() {
        records.removeAll()
        byteCount = 0
    }
}

import DataProtection
import DataProtectionSQLite
import Foundation

/// Keychain items at scale (`dpctl bench --items`): `singleAdds` items added one at a time
/// (each a durable transaction), the rest up to `count` restored in batches of
/// `batch` (one transaction each), then `lookups` random lookups by attributes (service and
/// account) and `secretReads` random secret reads by identifier, with the device unlocked.
package struct ItemsWorkload: Sendable {
    /// Items in the keychain when the lookups run.
    package var count = 100_000
    /// Items added one `add` at a time (the rest in batches).
    package var singleAdds = 1_000
    /// Items per batch of the bulk part.
    package var batch = 1_000
    /// Random lookups by attributes.
    package var lookups = 10_000
    /// Random secret reads by identifier.
    package var secretReads = 10_000

    package init() {}

    /// What one run measured.
    package struct Figures: Sendable {
        package var singleAdd: Duration
        package var bulkAddPerItem: Duration
        package var lookupMedian: Duration
        package var lookupP99: Duration
        package var secretMedian: Duration
        package var secretP99: Duration
        package var onDiskBytes: UInt64
    }

    /// Runs the workload on `scratch`'s store (unlocked).
    package func measure(_ scratch: BenchScratch, progress: (String) -> Void) throws -> Figures {
        let keychain = scratch.store.keychain
        let secret = ItemSecret(bytes: (0..<32).map { UInt8($0) })
        func attributes(_ index: Int) -> [String: String] {
            ["service": "svc-\(index % 1000).example.com", "account": "user-\(index)"]
        }
        let singles = min(singleAdds, count)
        progress("items: \(singles) single adds")
        let singleTime = try StoreBenchmarking.measure {
            for index in 0..<singles {
                try keychain.add(secret, label: "item \(index)", attributes: attributes(index), accessibility: .whenUnlocked)
            }
        }
        progress("items: \(count - singles) more in batches of \(batch)")
        var bulkTime = Duration.zero
        var index = singles
        let now = Date()
        while index < count {
            let end = min(count, index + batch)
            let entries = (index..<end).map { index in
                MigratableItem(item: KeychainItem(id: Self.identifier(index), label: "item \(index)", attributes: attributes(index),
                                                  accessibility: .whenUnlocked, creationDate: now, modificationDate: now),
                               secret: secret)
            }
            bulkTime += try StoreBenchmarking.measure { try keychain.restore(entries) }
            index = end
        }
        progress("items: \(lookups) lookups by attributes")
        var generator = SystemRandomNumberGenerator()
        var lookupTimes: [Duration] = []
        var ids: [String] = []
        for _ in 0..<lookups {
            let target = Int.random(in: 0..<count, using: &generator)
            var found: [KeychainItem] = []
            lookupTimes.append(try StoreBenchmarking.measure { found = try keychain.items(matching: attributes(target)).items })
            guard found.count == 1 else { throw DataProtectionError(.integrityFailure, "item \(target) found \(found.count) times") }
            ids.append(found[0].id)
        }
        progress("items: \(secretReads) secret reads")
        var secretTimes: [Duration] = []
        for position in 0..<secretReads {
            let id = ids[position % ids.count]
            secretTimes.append(try StoreBenchmarking.measure { try keychain.secret(ofItemWithID: id).wipe() })
        }
        return Figures(singleAdd: singleTime / max(singles, 1), bulkAddPerItem: bulkTime / max(count - singles, 1),
                       lookupMedian: median(lookupTimes), lookupP99: Self.percentile(lookupTimes, 0.99),
                       secretMedian: median(secretTimes), secretP99: Self.percentile(secretTimes, 0.99),
                       onDiskBytes: Self.bytes(under: scratch.directory))
    }

    /// The table's rows for `figures`.
    package func rows(_ figures: Figures) -> [BenchRow] {
        let micro = StoreBench.micro
        return [
            BenchRow(what: "item add, one durable transaction each", store: micro(figures.singleAdd), baseline: "-", ratio: nil,
                     target: "-", met: nil, note: "\(min(singleAdds, count)) adds"),
            BenchRow(what: "item add in batches of \(batch) (restore)", store: micro(figures.bulkAddPerItem), baseline: "-", ratio: nil,
                     target: "-", met: nil, note: "per item, up to \(count) items"),
            BenchRow(what: "item lookup by 2 attributes, median", store: micro(figures.lookupMedian), baseline: "-", ratio: nil,
                     target: "-", met: nil, note: "\(lookups) random, \(count) items"),
            BenchRow(what: "item lookup by 2 attributes, p99", store: micro(figures.lookupP99), baseline: "-", ratio: nil,
                     target: "< 1 ms", met: figures.lookupP99 < .milliseconds(1)),
            BenchRow(what: "item secret by id, median / p99", store: "\(micro(figures.secretMedian)) / \(micro(figures.secretP99))",
                     baseline: "-", ratio: nil, target: "-", met: nil, note: "\(secretReads) reads"),
            BenchRow(what: "items on disk", store: String(format: "%.1f MiB", Double(figures.onDiskBytes) / 1_048_576), baseline: "-",
                     ratio: nil, target: "-", met: nil, note: "\(count) items, 32-byte secrets"),
        ]
    }

    static func identifier(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 32 - hex.count) + hex
    }

    static func percentile(_ values: [Duration], _ fraction: Double) -> Duration {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .zero }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
    }

    static func bytes(under directory: URL) -> UInt64 {
        var total: UInt64 = 0
        let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.fileSizeKey])
        while let url = walker?.nextObject() as? URL {
            total += UInt64((try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0)
        }
        return total
    }
}

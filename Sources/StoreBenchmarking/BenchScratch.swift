import DataProtection
import Foundation

/// A scratch directory holding a store and raw baseline files for one benchmark
/// run; ``remove()`` deletes it all.
package final class BenchScratch: @unchecked Sendable {
    /// The scratch directory.
    package let directory: URL
    /// The store, unlocked (with `passcode` set when one was given).
    package let store: ProtectedStore

    /// A new scratch store under `parent` (default: the temporary directory).
    package init(configuration: DeviceConfiguration = BenchScratch.cheapConfiguration, passcode: String? = nil,
                 in parent: URL? = nil) throws {
        directory = (parent ?? FileManager.default.temporaryDirectory)
            .appendingPathComponent("dp-bench-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("raw"), withIntermediateDirectories: true)
        store = try ProtectedStore(directory: directory.appendingPathComponent("store"), configuration: configuration)
        try store.device.unlock()
        if let passcode { try store.device.setPasscode(passcode) }
    }

    /// Grace 0 and the cheapest passcode derivation: for the content benchmarks, where the passcode plays no part.
    package static let cheapConfiguration = DeviceConfiguration(gracePeriod: .zero, passcodeCost: .minimal)

    /// A path for a raw (baseline) file.
    package func rawPath(_ name: String) -> URL {
        directory.appendingPathComponent("raw").appendingPathComponent(name)
    }

    /// Deletes the scratch directory.
    package func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Times `body` with the continuous clock.
package func measure(_ body: () throws -> Void) rethrows -> Duration {
    let clock = ContinuousClock()
    let start = clock.now
    try body()
    return clock.now - start
}

/// The median of `values` (the mean of the middle two for an even count); zero when empty.
package func median(_ values: [Duration]) -> Duration {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .zero }
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

extension Duration {
    /// Seconds as a `Double`.
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

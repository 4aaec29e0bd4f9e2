import Foundation
import SodiumBridge
import Testing

/// The scanner behind the key-hygiene tests finds what it must and only that.
@Suite("Memory scanner", .enabled(if: !underSanitizer, "the sanitizers' shadow memory is terabytes of readable reservations"))
struct MemoryScannerTests {
    @Test("a secret in an ordinary heap buffer is found, and no longer once the buffer is wiped")
    func findsAndForgets() throws {
        #if os(Linux)
        var buffer = Random.bytes(count: 4096)
        let secrets = buffer.withUnsafeBytes { raw in
            [SecretRecorder.Secret(label: "heap window", bytes: UnsafeRawBufferPointer(rebasing: raw[1000..<1032]))]
        }
        let found = try MemoryScanner.scan(for: secrets)
        #expect(found.findings.count == 1, "\(found.findings)")
        #expect(found.findings.first?.label == "heap window")
        #expect(found.bytesScanned > 1 << 20)
        Memory.wipe(&buffer)
        let gone = try MemoryScanner.scan(for: secrets)
        #expect(gone.findings.isEmpty, "\(gone.findings)")
        #endif
    }

    @Test("a secret in secure memory is found while it lives and not after wipe()")
    func secureBytes() throws {
        #if os(Linux)
        let key = SecureBytes.random(count: 32)
        let secrets = key.withUnsafeBytes { [SecretRecorder.Secret(label: "key", bytes: $0)] }
        #expect(try MemoryScanner.scan(for: secrets).findings.count == 1)
        key.wipe()
        #expect(try MemoryScanner.scan(for: secrets).findings.isEmpty)
        #endif
    }

    @Test("secure memory is locked against swapping (Locked in /proc/self/smaps) while RLIMIT_MEMLOCK allows")
    func locked() throws {
        #if os(Linux)
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(8), &limit)  // RLIMIT_MEMLOCK (not imported as a constant)
        let key = SecureBytes.random(count: 4096)
        let address = key.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        let smaps = try String(decoding: FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/smaps")).readToEnd() ?? Data(),
                               as: UTF8.self)
        var inMapping = false
        var lockedKiB: Int?
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = fields.first, range.contains("-"), fields.count >= 5 {
                let bounds = range.split(separator: "-").compactMap { UInt($0, radix: 16) }
                inMapping = bounds.count == 2 && bounds[0] <= address && address < bounds[1]
            } else if inMapping, fields.first == "Locked:", fields.count >= 2 {
                lockedKiB = Int(fields[1])
            }
        }
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let lockedTotal = status.split(separator: "\n").first { $0.hasPrefix("VmLck:") } ?? "VmLck: ?"
        print("secure memory: Locked \(lockedKiB.map(String.init) ?? "?") kB in the key's mapping; process \(lockedTotal); "
              + "RLIMIT_MEMLOCK \(limit.rlim_cur == rlim_t.max ? "unlimited" : "\(limit.rlim_cur / 1024) KiB")")
        // libsodium ignores a failing mlock: only a limit that is (nearly) exhausted, e.g. by
        // other tests holding secure memory, excuses an unlocked key.
        let lockedNow = lockedTotal.split(separator: " ", omittingEmptySubsequences: true)
            .compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.first ?? Int.max
        #expect(lockedKiB != nil)
        if limit.rlim_cur == rlim_t.max || UInt64(lockedNow) + 1024 < UInt64(limit.rlim_cur / 1024) {
            #expect((lockedKiB ?? 0) >= 4)
        }
        #endif
    }
}

/// Whether `.ci/sanitizers` runs the tests (it sets `DP_SANITIZER`).
let underSanitizer = ProcessInfo.processInfo.environment["DP_SANITIZER"] != nil

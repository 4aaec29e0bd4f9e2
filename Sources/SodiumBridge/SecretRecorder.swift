import CSodium
import Foundation
import Synchronization

/// Test-only: records secrets as they come into being, so that a test can later
/// prove no copy of them is left anywhere in the process's memory (README, "Security").
///
/// Compiled in but inert: outside ``recording(isolation:_:)``, ``record(_:_:)`` costs one
/// atomic load. While recording, only secrets created within the recording task are
/// kept (a task-local value; tests running in parallel create keys of their own).
/// A record never holds the secret's bytes: it holds them XORed with a random mask
/// kept beside them, so that the recorder itself is never a match when memory is
/// scanned (``MemoryScanner``).
package enum SecretRecorder {
    /// One recorded secret, masked.
    package struct Secret: Sendable, CustomStringConvertible {
        /// What the secret was (`"class key complete"`, `"file key"`, …).
        package let label: String
        let masked: Data
        let mask: Data
        /// The secret's length in bytes.
        package var count: Int { masked.count }
        package var description: String { "\(label) (\(count) bytes)" }

        /// Masks `bytes` (a secret the caller holds, e.g. plaintext it is about to write).
        package init(label: String, bytes: UnsafeRawBufferPointer) {
            self.label = label
            let mask = Random.bytes(count: bytes.count)
            var masked = Data(count: bytes.count)
            masked.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) in
                mask.withUnsafeBytes { (m: UnsafeRawBufferPointer) in
                    for index in 0..<bytes.count { out[index] = bytes[index] ^ m[index] }
                }
            }
            self.masked = masked
            self.mask = mask
        }

        /// Whether `text` shows the secret: its raw bytes, hex (either case), base64 or base64url.
        package func occurs(in text: String) -> Bool {
            let plain = SecureBytes(count: count)
            plain.withUnsafeMutableBytes { unmask(into: $0) }
            defer { plain.wipe() }
            return plain.withUnsafeBytes { raw -> Bool in
                var bytes = Data(raw)
                defer { Memory.wipe(&bytes) }  // (the hex and base64 strings are this test's own copies of its own keys)
                let hex = bytes.map { String(format: "%02x", $0) }.joined()
                let base64 = bytes.base64EncodedString()
                let base64URL = base64.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                    .replacingOccurrences(of: "=", with: "")
                let forms = [hex, hex.uppercased(), String(base64.prefix(40)), String(base64URL.prefix(40))]
                return Data(text.utf8).range(of: bytes) != nil || forms.contains { text.contains($0) }
            }
        }

        /// Writes the secret's bytes into `out` (secure memory of the scanner).
        func unmask(into out: UnsafeMutableRawBufferPointer) {
            masked.withUnsafeBytes { (s: UnsafeRawBufferPointer) in
                mask.withUnsafeBytes { (m: UnsafeRawBufferPointer) in
                    for index in 0..<count { out[index] = s[index] ^ m[index] }
                }
            }
        }
    }

    /// The secrets of one ``recording(isolation:_:)`` call.
    fileprivate final class Session: Sendable {
        let secrets = Locked<[Secret]>([])
    }

    private static let active = Atomic<Int>(0)
    @TaskLocal private static var session: Session?

    /// Runs `body` recording the secrets created within its task (and its child tasks).
    /// Recordings in other tasks, e.g. tests running in parallel, are kept apart.
    package static func recording<R>(
        isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> R
    ) async rethrows -> R {
        active.add(1, ordering: .sequentiallyConsistent)
        defer { active.subtract(1, ordering: .sequentiallyConsistent) }
        return try await $session.withValue(Session(), operation: body)
    }

    /// The recording of the current task, to carry to work it hands to another thread (which
    /// task-local values do not reach): ``carrying(_:_:)`` runs that work inside it.
    package struct Carrier: Sendable {
        fileprivate let session: Session?
    }

    /// The current task's recording (none outside ``recording(isolation:_:)``).
    package static var carrier: Carrier { Carrier(session: active.load(ordering: .relaxed) > 0 ? session : nil) }

    /// Runs `body` (on any thread) recording into `carrier`'s recording, as if in its task.
    package static func carrying<R, E: Error>(_ carrier: Carrier, _ body: () throws(E) -> R) throws(E) -> R {
        guard let recording = carrier.session else { return try body() }
        let result: Result<R, E> = $session.withValue(recording) {
            do throws(E) { return .success(try body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// The secrets recorded so far by the enclosing ``recording(isolation:_:)`` (empty outside one).
    package static var recorded: [Secret] { session?.secrets.withLock { $0 } ?? [] }

    /// Records `secret` under `label` when called within ``recording(isolation:_:)``; otherwise does nothing.
    @inline(__always)
    package static func record(_ secret: SecureBytes, _ label: @autoclosure () -> String) {
        guard active.load(ordering: .relaxed) > 0, let session else { return }
        let entry = secret.withUnsafeBytes { Secret(label: label(), bytes: $0) }
        session.secrets.withLock { $0.append(entry) }
    }
}

/// Wiping of public buffers that briefly held secret bytes.
package enum Memory {
    /// Zeroes the bytes of `data` where they are (`sodium_memzero`, which the compiler cannot elide).
    ///
    /// A buffer shared with other `Data` values is wiped in place, for all of them, rather
    /// than copied first (which a mutation would do, leaving the original bytes behind):
    /// call it only on buffers the library itself made. Small values (14 bytes or fewer)
    /// may be stored inline in the value itself; they are zeroed there.
    package static func wipe(_ data: inout Data) {
        guard !data.isEmpty else { return }
        if data.count <= 14 {
            data.withUnsafeMutableBytes { raw in
                if let base = raw.baseAddress { sodium_memzero(base, raw.count) }
            }
            return
        }
        data.withUnsafeBytes { raw in
            if let base = raw.baseAddress { sodium_memzero(UnsafeMutableRawPointer(mutating: base), raw.count) }
        }
    }
}

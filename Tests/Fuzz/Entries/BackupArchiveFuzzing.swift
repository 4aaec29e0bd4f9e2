import DataProtection
import DataProtectionBackup
import Foundation
import SodiumBridge

/// Backup archives as a restore meets them: anyone can encrypt an archive to a user's public
/// age recipient, so everything behind the age layer (the pax tar, its paths, classes and
/// sizes) is attacker-chosen, and the age header is for anyone who can hand over a file.
///
/// Input: `selector || payload`; the selector picks the layer (modulo 3):
/// 0 the payload as an age file, verified with the fixed identities (the header parser, the
/// scrypt stanza with a work factor capped at 2^10, the STREAM chunks); 1 the payload as the
/// plaintext tar of an archive encrypted to the fixed recipient, verified (the tar reader
/// behind a valid age layer); 2 the same, restored into a new empty store, after which a
/// failed restore must have left the store empty (all or nothing) and nothing may exist
/// outside the store's own directory.
enum BackupArchiveFuzzing {
    /// The fixed test identity of `Keys/vectors/backup` (it protects nothing).
    static let identityLine = "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX"
    /// The passphrase of the scrypt vector (`dpctl_scrypt`).
    static let passphrase = "vector passphrase"

    static let identities: [AgeIdentity] = {
        guard let x25519 = try? AgeIdentity.identities(inFile: Passcode(identityLine)) else {
            fatalError("the fixed backup identity does not parse")
        }
        return x25519 + [AgeIdentity(passphrase: Passcode(passphrase), maxWorkFactor: 10)]
    }()

    static func run(_ data: Data) {
        var input = FuzzInput(data)
        let selector = input.byte() % 3
        let payload = input.rest()
        switch selector {
        case 0:
            _ = try? Backup.verify(from: reading(payload), identities: identities)
        case 1:
            guard let archive = encrypted(payload) else { return }
            _ = try? Backup.verify(from: reading(archive), identities: identities)
        default:
            guard let archive = encrypted(payload) else { return }
            restore(archive)
        }
    }

    private static func restore(_ archive: Data) {
        let fixture = FuzzFixture.shared
        let scratch = fixture.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let storeDirectory = scratch.appendingPathComponent("store")
        guard let store = try? ProtectedStore(directory: storeDirectory, clock: VirtualClock(),
                                              configuration: DeviceConfiguration(passcodeCost: .fixed(operations: 1, memoryBytes: 8192))),
              (try? store.device.unlock()) != nil
        else { return }
        let before = Set((try? FileManager.default.contentsOfDirectory(atPath: fixture.root.path)) ?? [])
        do throws(DataProtectionError) {
            try Backup.restore(from: reading(archive), identities: identities, into: store)
        } catch {
            let left = (try? store.contentsOfDirectory(atPath: "/")) ?? ["(unlistable)"]
            precondition(left.isEmpty, "a failed restore (\(error.code)) left \(left) in the store")
        }
        let after = Set((try? FileManager.default.contentsOfDirectory(atPath: fixture.root.path)) ?? [])
        precondition(after == before, "a restore wrote outside its store: \(after.subtracting(before))")
        let beside = (try? FileManager.default.contentsOfDirectory(atPath: scratch.path)) ?? []
        precondition(beside == ["store"], "a restore wrote beside its store: \(beside)")
    }

    /// `plaintext` as an age file to the fixed identity's recipient.
    private static func encrypted(_ plaintext: Data) -> Data? {
        guard let recipient = identities.first?.recipient else { return nil }
        let sink = Sink()
        guard let encryptor = try? AgeEncryptor(recipients: [recipient], output: BackupOutput { data in sink.append(data) }),
              (try? encryptor.write(plaintext)) != nil, (try? encryptor.finish()) != nil
        else { return nil }
        return sink.data
    }

    private static func reading(_ data: Data) -> BackupInput {
        let source = Sink()
        source.append(data)
        return BackupInput { count in source.take(count) }
    }
}

/// Bytes written by one side and read by the other, on one thread.
private final class Sink: @unchecked Sendable {
    private(set) var data = Data()
    private var offset = 0

    func append(_ more: Data) { data.append(more) }

    func take(_ count: Int) -> Data {
        let end = min(data.count, offset + count)
        defer { offset = end }
        return data.subdata(in: offset..<end)
    }
}

import DataProtection
import Foundation
import SodiumBridge

/// The device's files and the store's directory metadata and names.
///
/// Input: `selector || payload`; the selector picks the decoder (modulo 6):
/// 0 keybag body, 1 keybag file as found, 2 keybag file sealed by the harness
/// around the payload (so the body parser runs behind a valid seal), 3 attempt
/// counter as found and with a valid MAC, 4 a whole device directory
/// (`uid`, `effaceable`, `keybag`, `attempts`, each u16-length-prefixed; a
/// length of 0xFFFF leaves the file out) booted by `Device`, 5 `dpdir` and
/// encrypted names (base64url parsing, decryption, and the encrypt/decrypt round trip).
enum KeyFilesFuzzing {
    static func run(_ data: Data) {
        var input = FuzzInput(data)
        let selector = input.byte() % 6
        let fixture = FuzzFixture.shared
        switch selector {
        case 0:
            let payload = input.rest()
            if let bag = try? Keybag.decodeBody(payload) {
                // What decodes must encode back to a keybag that decodes to the same value.
                let again = try? Keybag.decodeBody(bag.encodedBody())
                precondition(again == bag, "keybag body does not round-trip")
            }
        case 1:
            _ = try? Keybag.open(file: input.rest(), sealKey: fixture.fixedKey)
        case 2:
            let body = input.rest()
            let header = Data("DPKB".utf8) + Data([1])
            let nonce = Data(count: XChaCha20Poly1305.nonceByteCount)
            guard let sealed = try? XChaCha20Poly1305.seal(body, using: fixture.fixedKey, nonce: nonce, authenticating: header) else { return }
            _ = try? Keybag.open(file: header + nonce + sealed, sealKey: fixture.fixedKey)
        case 3:
            let payload = input.rest()
            _ = try? AttemptRecord.decode(payload, macKey: fixture.fixedKey)
            let body = payload.prefix(max(0, payload.count - 32))
            if let record = try? AttemptRecord.decode(Data(body) + BLAKE2b.mac(key: fixture.fixedKey, [.data(Data(body))]), macKey: fixture.fixedKey) {
                let again = try? AttemptRecord.decode(record.encoded(macKey: fixture.fixedKey), macKey: fixture.fixedKey)
                precondition(again == record, "attempt counter does not round-trip")
            }
        case 4:
            deviceDirectory(&input, fixture: fixture)
        default:
            directoryAndNames(&input, fixture: fixture)
        }
    }

    private static func deviceDirectory(_ input: inout FuzzInput, fixture: FuzzFixture) {
        let directory = fixture.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for name in ["uid", "effaceable", "keybag", "attempts"] {
            let length = input.uint16()
            guard length != 0xFFFF else { continue }
            try? input.bytes(length).write(to: directory.appendingPathComponent(name))
        }
        guard let device = try? Device(directory: directory, clock: VirtualClock(),
                                       configuration: DeviceConfiguration(passcodeCost: .fixed(operations: 1, memoryBytes: 8192))) else { return }
        _ = device.state
        _ = device.isProtectedDataAvailable
    }

    private static func directoryAndNames(_ input: inout FuzzInput, fixture: FuzzFixture) {
        let device = fixture.store.device
        _ = try? DirectoryMetadata.decode(input.piece(), device: device)
        let directoryID = Data(repeating: 7, count: 16)
        let names = input.rest()
        for piece in names.split(separator: 0, maxSplits: 8, omittingEmptySubsequences: false) {
            let text = String(decoding: piece, as: UTF8.self)
            if let decoded = Base64URL.decode(text) {
                precondition(Base64URL.encode(decoded) == text, "base64url accepted a non-canonical spelling")
            }
            _ = try? NameCipher.decrypt(text, directoryID: directoryID, device: device)
            if let encrypted = try? NameCipher.encrypt(text, directoryID: directoryID, device: device) {
                let back = try? NameCipher.decrypt(encrypted, directoryID: directoryID, device: device)
                precondition(back == text, "a name does not survive encryption")
            }
        }
    }
}

import Foundation
import SodiumBridge
import SystemPackage
import Testing
@testable import DataProtection

/// An attacker with a disk image (issue 12), on a real file system: the device and its
/// store live in a loop-mounted ext4 image through a passcode's whole life and an erase;
/// the image is then carved as a forensic tool would, for every keybag, effaceable key
/// slot and device key it still holds, live or in freed blocks.
///
/// ``ForensicRecordingTests`` proves the same against a model of the disk; this test
/// checks that ext4 really keeps what the model says it keeps (old keybags in freed
/// blocks) and destroys what it says it destroys (an effaceable key overwritten in place).
/// It needs root and loop devices, and is skipped where the machine has neither.
@Suite("Forensics: a loop-mounted ext4 image", .serialized)
struct DiskImageForensicsTests {
    /// Runs `arguments` and returns its exit status (output discarded, or kept for a failure).
    @discardableResult
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    /// Whether this machine lets the test make and mount an ext4 image (root, loop devices, mkfs.ext4).
    static let canMountImages: Bool = {
        #if os(Linux)
        guard geteuid() == 0, FileManager.default.fileExists(atPath: "/dev/loop-control") else { return false }
        return (try? run(["sh", "-c", "command -v mkfs.ext4 && command -v mount && command -v umount"]).status) == 0
        #else
        return false
        #endif
    }()

    /// Every offset at which `pattern` occurs in `image`.
    static func offsets(of pattern: Data, in image: Data) -> [Int] {
        var found: [Int] = []
        var start = image.startIndex
        while let range = image.range(of: pattern, in: start..<image.endIndex) {
            found.append(range.lowerBound)
            start = range.lowerBound + 1
        }
        return found
    }

    /// What a carver finds: the keybags, the non-zero effaceable key slots and the device keys.
    struct Carved {
        var keybags: Set<Data> = []
        var effaceableKeys: Set<Data> = []
        var deviceKeys: Set<Data> = []
    }

    static func carve(_ image: Data) -> Carved {
        var carved = Carved()
        for offset in offsets(of: Keybag.magic, in: image) where offset + Keybag.fileByteCount <= image.count {
            carved.keybags.insert(image.subdata(in: offset..<offset + Keybag.fileByteCount))
        }
        for offset in offsets(of: DeviceFiles.effaceableMagic, in: image) {
            for slot in 0..<DeviceFiles.effaceableSlotCount {
                let start = offset + 5 + 32 * slot
                guard start + 32 <= image.count else { break }
                let key = image.subdata(in: start..<start + 32)
                if key.contains(where: { $0 != 0 }) { carved.effaceableKeys.insert(key) }
            }
        }
        for offset in offsets(of: FileDeviceKey.magic, in: image) where offset + FileDeviceKey.fileByteCount <= image.count {
            carved.deviceKeys.insert(image.subdata(in: offset + 5..<offset + FileDeviceKey.fileByteCount))
        }
        return carved
    }

    static func secret(_ data: Data) -> SecureBytes {
        SecureBytes(count: data.count) { $0.copyBytes(from: data) }
    }

    /// Every slot key of `keybag` that opens with the device-only key, without a passcode, or
    /// with one of `passcodes`.
    static func slotKeys(_ keybag: Keybag, hierarchy: KeyHierarchy, passcodes: [String]) throws -> Set<Data> {
        var wrappingKeys = [try hierarchy.deviceOnlyKey(), try hierarchy.passcodeKey(passcode: SecureBytes(count: 0), parameters: .none)]
        if case .argon2id = keybag.passcode {
            for passcode in passcodes {
                wrappingKeys.append(try hierarchy.passcodeKey(passcode: secret(Data(passcode.utf8)), parameters: keybag.passcode))
            }
        }
        var keys = Set<Data>()
        for slot in KeybagSlot.allCases {
            for wrappingKey in wrappingKeys {
                if let key = keybag.unwrap(slot, with: wrappingKey) { keys.insert(key.withUnsafeBytes { Data($0) }) }
            }
        }
        return keys
    }

    @Test(
        "init with a passcode, change, removal, a new passcode and an erase on ext4: the image holds old keybags, none opens, and nothing from before the erase is recoverable",
        .enabled(if: canMountImages, "needs root, loop devices and mkfs.ext4")
    )
    func passcodeLifecycleOnExt4() throws {
        try withScratchDirectory { scratch in
            let image = scratch.appendingPathComponent("disk.ext4")
            let mountPoint = scratch.appendingPathComponent("mnt")
            try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
            #expect(try Self.run(["truncate", "-s", "64M", image.path]).status == 0)
            let format = try Self.run(["mkfs.ext4", "-q", "-F", "-b", "4096", image.path])
            try #require(format.status == 0, "mkfs.ext4: \(format.output)")
            let mount = try Self.run(["mount", "-o", "loop", image.path, mountPoint.path])
            try #require(mount.status == 0, "mount: \(mount.output)")
            var mounted = true
            defer { if mounted { _ = try? Self.run(["umount", mountPoint.path]) } }

            // Markers of every kind an attacker would look for: contents of each class, and a name.
            let tag = Random.bytes(count: 8).map { String(format: "%02x", $0) }.joined()
            let contents = ["none", "complete", "untilFirstAuthentication"].map { "forensic content \($0) \(tag)" }
            let name = "Forensic name \(tag)"
            let passcodes = ["1111", "2222", "3333", "4444"]
            let deviceDirectory = FilePath(mountPoint.appendingPathComponent("device").path)
            var before = Set<Data>()
            var oldPasscodes = Array(passcodes.prefix(3))
            var pastEffaceableKeys: [Data] = []  // kept by the test, as no attacker can
            let hierarchy: KeyHierarchy  // the device's: the past keys the test kept are sealed under it
            do {
                let device = try Device(directory: deviceDirectory, clock: VirtualClock(), configuration: .testing(),
                                        fileSystem: PosixFileSystem(), creatingWithPasscode: Passcode(passcodes[0]))
                hierarchy = device.hierarchy
                let store = try ProtectedStore(directory: mountPoint.appendingPathComponent("files"), device: device)
                try device.unlock(passcode: passcodes[0])
                try store.createDirectory(atPath: name)
                try store.write(Data(contents[0].utf8), to: "\(name)/none.txt", protection: .none)
                try store.write(Data(contents[1].utf8), to: "\(name)/complete.txt", protection: .complete)
                try store.write(Data(contents[2].utf8), to: "\(name)/default.txt")
                // Every class key of the first keybag, and the metadata key: what the erase must make unrecoverable.
                let files = DeviceFiles(directory: deviceDirectory, fileSystem: PosixFileSystem())
                let effaceable = try #require(try files.readEffaceableKey())
                func keepEffaceableKey() throws {
                    if let key = try files.readEffaceableKey() { pastEffaceableKeys.append(key.withUnsafeBytes { Data($0) }) }
                }
                try keepEffaceableKey()
                let first = try files.readKeybag(sealKey: try hierarchy.sealKey(effaceable: effaceable))
                before = try Self.slotKeys(first, hierarchy: hierarchy, passcodes: [passcodes[0]])
                #expect(before.count == KeybagSlot.allCases.count, "the positive control opens every slot of the live keybag")

                try device.changePasscode(from: passcodes[0], to: passcodes[1])
                try keepEffaceableKey()
                try device.removePasscode(passcodes[1])
                try keepEffaceableKey()
                try device.setPasscode(passcodes[2])
                try keepEffaceableKey()
                var current = passcodes[2]
                for index in 0..<10 {  // more keybag versions in freed blocks
                    let next = "33\(10 + index)"
                    try device.changePasscode(from: current, to: next)
                    try keepEffaceableKey()
                    oldPasscodes.append(next)
                    current = next
                }
                try device.erase()
                #expect(try store.contentsOfDirectory(atPath: "/").isEmpty)
                try device.unlock()
                try device.setPasscode(passcodes[3])
                try store.write(Data("after the erase \(tag)".utf8), to: "after.txt", protection: .complete)
            }
            // The device and store are released (their ownership lock with them): unmount, then read the disk.
            let unmount = try Self.run(["umount", mountPoint.path])
            try #require(unmount.status == 0, "umount: \(unmount.output)")
            mounted = false
            let disk = try Data(contentsOf: image)

            // Nothing is in the clear: no content of any class, no name.
            for marker in contents + [name, "after the erase \(tag)"] {
                #expect(disk.range(of: Data(marker.utf8)) == nil, "\"\(marker)\" is on the disk in the clear")
            }
            let carved = Self.carve(disk)
            // The disk keeps history: old keybags are still in freed blocks (else this test would prove nothing).
            #expect(carved.keybags.count > 2, "only \(carved.keybags.count) keybags carved from the image")
            #expect(!carved.deviceKeys.isEmpty && !carved.effaceableKeys.isEmpty)
            var opened: [(keybag: Keybag, hierarchy: KeyHierarchy)] = []  // each with the carved device key that opened it
            var pairsTried = 0
            for deviceKey in carved.deviceKeys {
                let carvedHierarchy = KeyHierarchy(deviceKey: FileDeviceKey(key: Self.secret(deviceKey)))
                for keybag in carved.keybags {
                    for key in carved.effaceableKeys {
                        pairsTried += 1
                        if let bag = try? Keybag.open(file: keybag, sealKey: try carvedHierarchy.sealKey(effaceable: Self.secret(key))) {
                            opened.append((bag, carvedHierarchy))
                        }
                    }
                }
            }
            // The control: the effaceable keys of the past (kept by the test, gone from the disk) open
            // carved keybags, so the carving finds them and only the overwritten keys are missing.
            try #require(pastEffaceableKeys.count > 10)
            let past = pastEffaceableKeys  // every one replaced since: the current key came after the erase
            #expect(carved.effaceableKeys.isDisjoint(with: past), "an effaceable key of the past is still on the disk")
            let pastSeals = try past.map { key in try hierarchy.sealKey(effaceable: Self.secret(key)) }
            let reopened = carved.keybags.filter { file in pastSeals.contains { (try? Keybag.open(file: file, sealKey: $0)) != nil } }
            #expect(reopened.count >= past.count / 2,
                    "only \(reopened.count) carved keybags open with the \(past.count) past keys: the carving misses them")
            // Only the current keybag opens, and it needs the current passcode for its protected classes.
            #expect(opened.count == 1, "\(opened.count) of \(pairsTried) keybag and effaceable key pairs open")
            for (bag, carvedHierarchy) in opened {
                #expect(bag.passcode != .none)
                let recovered = try Self.slotKeys(bag, hierarchy: carvedHierarchy, passcodes: oldPasscodes + [passcodes[3]])
                #expect(recovered.count == KeybagSlot.allCases.count, "the current keybag opens with its passcode")
                #expect(recovered.isDisjoint(with: before), "a key from before the erase is recoverable from the image")
                let withoutPasscode = try Self.slotKeys(bag, hierarchy: carvedHierarchy, passcodes: oldPasscodes)
                #expect(withoutPasscode.count == 2, "without the current passcode only class none and the metadata key open")
            }
            print("ext4 image forensics: \(disk.count) bytes carved, \(carved.keybags.count) keybags, "
                  + "\(carved.effaceableKeys.count) effaceable keys, \(carved.deviceKeys.count) device keys, "
                  + "\(pairsTried) pairs tried, \(opened.count) opened; \(reopened.count) open with the \(past.count) past keys the test kept")
        }
    }
}

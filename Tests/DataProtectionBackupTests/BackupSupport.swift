import Foundation
import SystemPackage
import SodiumBridge
import Testing
@testable import DataProtection
@testable import DataProtectionBackup

// Helpers of the backup tests: scratch directories, stores on two devices, the real `age`
// and `tar` binaries.

/// A fresh 0700 directory for one test, removed afterwards.
func withScratch<R>(_ body: (URL) throws -> R) throws -> R {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("dp-backup-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(at: root) }
    return try body(root)
}

let testConfiguration = DeviceConfiguration(passcodeCost: .minimal, ownershipTimeout: .milliseconds(500))

/// A store with its device apart, created with `passcode` and unlocked.
func makeStore(in root: URL, name: String, passcode: String = "1234") throws -> ProtectedStore {
    let store = try ProtectedStore(creatingAt: root.appendingPathComponent(name), deviceDirectory: root.appendingPathComponent(name + "-device"),
                                   passcode: passcode, configuration: testConfiguration)
    try store.device.unlock(passcode: passcode)
    return store
}

/// The result of a process run.
struct ProcessResult {
    let status: Int32
    let output: Data
    let error: String
}

/// Runs `executable` with `arguments`, feeding `input` (a file) to standard input.
@discardableResult
func run(_ executable: String, _ arguments: [String], input: URL? = nil, output: URL? = nil) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let errorPipe = Pipe(), outputPipe = Pipe()
    if let input { process.standardInput = try FileHandle(forReadingFrom: input) } else { process.standardInput = FileHandle.nullDevice }
    if let output {
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: output)
    } else {
        process.standardOutput = outputPipe
    }
    process.standardError = errorPipe
    try process.run()
    let data = output == nil ? outputPipe.fileHandleForReading.readDataToEndOfFile() : Data()
    let error = errorPipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return ProcessResult(status: process.terminationStatus, output: data, error: String(decoding: error, as: UTF8.self))
}

/// A key pair from the real `age-keygen`: the identity file and its `age1…` recipient.
func ageKeygen(in root: URL) throws -> (identityFile: URL, recipient: String) {
    let file = root.appendingPathComponent("key-\(UUID().uuidString).txt")
    let result = try run("/usr/bin/age-keygen", ["-o", file.path])
    #expect(result.status == 0, "\(result.error)")
    let recipient = result.error.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
    return (file, recipient)
}

/// The identities in `file` (an age identity file).
func identities(in file: URL) throws -> [AgeIdentity] {
    try AgeIdentity.identities(inFile: Passcode(bytes: try Data(contentsOf: file)))
}

/// Output to a local file.
func fileOutput(_ url: URL) throws -> (BackupOutput, FileDescriptor) {
    let descriptor = try FileDescriptor.open(FilePath(url.path), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
    return (BackupOutput.fileDescriptor(descriptor), descriptor)
}

/// Input from a local file.
func fileInput(_ url: URL) throws -> (BackupInput, FileDescriptor) {
    let descriptor = try FileDescriptor.open(FilePath(url.path), .readOnly)
    return (BackupInput.fileDescriptor(descriptor), descriptor)
}

/// Backs `store` up into `archive` for `recipients`.
@discardableResult
func backUp(_ store: ProtectedStore, to archive: URL, recipients: [AgeRecipient]) throws -> BackupSummary {
    let (output, descriptor) = try fileOutput(archive)
    defer { try? descriptor.close() }
    return try Backup.create(of: store, device: store.device, to: output, recipients: recipients)
}

/// Restores `archive` into `store`.
@discardableResult
func restore(_ archive: URL, into store: ProtectedStore, identities: [AgeIdentity]) throws -> BackupSummary {
    let (input, descriptor) = try fileInput(archive)
    defer { try? descriptor.close() }
    return try Backup.restore(from: input, identities: identities, into: store)
}

/// Every path below the root of `store`, with its type, class and content (files).
func snapshot(_ store: some ProtectedFileSystem, _ directory: String = "") throws -> [String: String] {
    var result: [String: String] = [:]
    for name in try store.contentsOfDirectory(atPath: directory.isEmpty ? "/" : directory) {
        let path = directory.isEmpty ? name : directory + "/" + name
        let attributes = try store.attributesOfItem(atPath: path)
        if attributes.type == .directory {
            result[path] = "dir \(attributes.protectionClass?.rawValue ?? "-")"
            result.merge(try snapshot(store, path)) { $1 }
        } else {
            let data = try store.contents(atPath: path)
            result[path] = "file \(attributes.protectionClass?.rawValue ?? "-") \(data.count) \(digest(data))"
        }
    }
    return result
}

/// A BLAKE2b digest of `data`, in hex.
func digest(_ data: Data) -> String {
    BLAKE2b.hash(byteCount: 16, [.data(data)]).map { String(format: "%02x", $0) }.joined()
}

/// Waits up to `seconds` for `condition`.
func eventually(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while Date() < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.02)
    }
    return condition()
}

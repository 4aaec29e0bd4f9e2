import Foundation

/// The fuzz targets of the package: each decodes untrusted bytes the way the
/// store, the device, the scenario runner or `dpctl` would meet them.
///
/// The same entry points run under libFuzzer (`dpfuzz <target>`, built by
/// `.ci/fuzz`) and in `swift test`, which replays every checked-in corpus
/// input and crash reproducer (`Tests/Fuzz/Corpus/<target>/`). An entry point
/// never fails on bad input: it returns; a crash (trap, sanitizer report) is a bug.
/// The `dpctl` argument target lives in `dpctl` itself (`ArgumentFuzzing`),
/// because an executable target cannot be imported by another executable.
package enum FuzzTarget: String, CaseIterable, Sendable {
    /// Protected files on disk: header slots, chunk records, the redo journal (through `OpenFile`).
    case fileFormat = "file-format"
    /// Device files: keybag (body and sealed file), attempt counter, `uid`/`effaceable`, `dpdir`, encrypted names.
    case keyFiles = "key-files"
    /// The scenario language parser.
    case scenario
    /// The agent protocol: frames from a byte stream, requests and responses.
    case agentFrames = "agent-frames"
    /// Backup archives: the age layer, and the pax tar behind it through verify and restore.
    case backupArchive = "backup-archive"

    /// Runs one input.
    package func run(_ input: Data) {
        switch self {
        case .fileFormat: FileFormatFuzzing.run(input)
        case .keyFiles: KeyFilesFuzzing.run(input)
        case .scenario: ScenarioFuzzing.run(input)
        case .agentFrames: AgentFrameFuzzing.run(input)
        case .backupArchive: BackupArchiveFuzzing.run(input)
        }
    }
}

/// A cursor over fuzz input that never fails: reads past the end yield zeros / empty data.
struct FuzzInput {
    private let bytes: Data
    private var offset = 0

    init(_ data: Data) { bytes = Data(data) }

    var isAtEnd: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint16() -> Int { Int(byte()) | Int(byte()) << 8 }

    /// Up to `count` bytes.
    mutating func bytes(_ count: Int) -> Data {
        let end = min(bytes.count, offset + max(0, count))
        defer { offset = end }
        return bytes.subdata(in: min(offset, end)..<end)
    }

    /// A length-prefixed (u16 LE) piece.
    mutating func piece() -> Data { bytes(uint16()) }

    mutating func rest() -> Data { bytes(bytes.count - offset) }
}

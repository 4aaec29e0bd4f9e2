import Foundation

/// A temporary store for one test, and a runner of `dpctl` against it
/// (`DPCTL_STORE` set, `DPCTL_PASSCODE` set or removed, standard input from a file or /dev/null).
final class StoreFixture {
    let directory: URL
    var store: URL { directory.appendingPathComponent("store") }
    /// `$XDG_STATE_HOME` of every run: the default device directories are made under it.
    var stateHome: URL { directory.appendingPathComponent("state") }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("dpctl-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// The environment of a run: this store, `passcode` (nil: no DPCTL_PASSCODE at all), no XDG surprises.
    func environment(passcode: String?, extra: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DPCTL_STORE"] = store.path
        environment["DPCTL_PASSCODE"] = passcode
        environment["DPCTL_NEW_PASSCODE"] = nil
        // Device directories go under the fixture, never into the real ~/.local/state.
        environment["XDG_STATE_HOME"] = stateHome.path
        environment["DPCTL_DEVICE"] = nil
        environment.merge(extra) { $1 }
        return environment
    }

    /// Runs `dpctl arguments`; standard input from `input` (else /dev/null), standard output
    /// into `outputFile` when given (then `standardOutput` is empty).
    @discardableResult
    func run(_ arguments: [String], passcode: String? = "1234", input: URL? = nil, outputFile: URL? = nil,
             extra: [String: String] = [:]) throws -> DPCtlRunner.Result {
        try DPCtlRunner.run(arguments, fullEnvironment: environment(passcode: passcode, extra: extra),
                            input: input, outputFile: outputFile)
    }

    /// `dpctl init` with passcode 1234 (or none).
    func initialize(passcode: String? = "1234") throws {
        let result = try run(passcode == nil ? ["init", "--no-passcode"] : ["init"], passcode: passcode)
        precondition(result.status == 0, "init failed: \(result.standardError)")
    }

    /// Writes `data` to a passcode file in the fixture directory, readable by its owner only.
    func passcodeFile(_ name: String, _ data: Data) throws -> URL {
        let url = try localFile(name, data)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        return url
    }

    /// Writes `data` to a local file in the fixture directory.
    func localFile(_ name: String, _ data: Data) throws -> URL {
        let url = directory.appendingPathComponent(name)
        try data.write(to: url)
        return url
    }
}

extension DPCtlRunner.Result {
    /// The JSON object printed on standard output.
    func json() throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(standardOutput.utf8))
        guard let dictionary = object as? [String: Any] else { throw CocoaError(.coderReadCorrupt) }
        return dictionary
    }
}

/// Deterministic bytes: `count` bytes of a counter-mixed pattern, different in every 1 MiB block.
func deterministicBytes(count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> Data {
    var data = Data(count: count)
    data.withUnsafeMutableBytes { buffer in
        let words = buffer.bindMemory(to: UInt64.self)
        var state = seed
        for index in words.indices {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            words[index] = state
        }
    }
    return data
}

import DataProtectionFuzzing
import Foundation

// `dpfuzz <target> [arguments]`: one binary for every fuzz target (`FuzzTarget`).
//
// Built by `.ci/fuzz` with `-D DP_LIBFUZZER`, coverage instrumentation, AddressSanitizer
// and libFuzzer's `fuzzer_no_main` runtime, `arguments` are libFuzzer's (a corpus
// directory, `-max_total_time=600`, a crash file to reproduce…). In an ordinary build
// the binary replays the files or directories given, one input per file.

let arguments = CommandLine.arguments
guard arguments.count >= 2, let target = FuzzTarget(rawValue: arguments[1]) else {
    let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")
    FileHandle.standardError.write(Data("usage: dpfuzz \(names) [libFuzzer arguments | inputs...]\n".utf8))
    exit(64)
}

#if DP_LIBFUZZER
@_silgen_name("LLVMFuzzerRunDriver")
func runLibFuzzer(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

nonisolated(unsafe) var selected = target
// libFuzzer sees the program name followed by its own arguments (the target name removed).
var libFuzzerArguments = [arguments[0]] + arguments.dropFirst(2)
var cStrings = libFuzzerArguments.map { strdup($0) } + [nil]
var argc = CInt(libFuzzerArguments.count)
let status = cStrings.withUnsafeMutableBufferPointer { buffer in
    var argv = buffer.baseAddress!
    return runLibFuzzer(&argc, &argv) { bytes, count in
        let input = bytes.map { Data(bytes: $0, count: count) } ?? Data()
        selected.run(input)
        return 0
    }
}
exit(status)
#else
var inputs = 0
for path in arguments.dropFirst(2) {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
    let files = isDirectory.boolValue
        ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { path + "/" + $0 }
        : [path]
    for file in files {
        guard let data = FileManager.default.contents(atPath: file) else { continue }
        target.run(data)
        inputs += 1
    }
}
print("dpfuzz \(target.rawValue): \(inputs) inputs replayed without a crash")
#endif

import ArgumentParser
import Foundation

/// The `cli` fuzz target: command lines as `dpctl` parses them.
///
/// An input is the arguments separated by NUL bytes (at most 32). They are
/// parsed and validated with the real command types, as `dpctl` would before
/// running anything, and any error is rendered as usage text and an exit code;
/// no command runs. `.ci/fuzz` builds `dpctl` itself as the fuzzer (with
/// `-D DP_LIBFUZZER`, `main` then hands over to libFuzzer); the tests replay the
/// checked-in corpus (`Tests/Fuzz/Corpus/cli/`) through ``check(_:)``.
enum ArgumentFuzzing {
    static func check(_ input: Data) {
        let arguments = input.split(separator: 0, maxSplits: 31, omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        do {
            _ = try DPCtl.parseAsRoot(arguments)
        } catch {
            _ = DPCtl.fullMessage(for: error)
            _ = DPCtl.exitCode(for: error)
        }
    }

    #if DP_LIBFUZZER
    /// Hands the process over to libFuzzer (fuzz builds only).
    static func runLibFuzzer() -> Never {
        var cStrings = CommandLine.arguments.map { strdup($0) } + [nil]
        var argc = CInt(CommandLine.arguments.count)
        let status = cStrings.withUnsafeMutableBufferPointer { buffer in
            var argv = buffer.baseAddress!
            return llvmFuzzerRunDriver(&argc, &argv) { bytes, count in
                ArgumentFuzzing.check(bytes.map { Data(bytes: $0, count: count) } ?? Data())
                return 0
            }
        }
        exit(status)
    }
    #endif
}

#if DP_LIBFUZZER
@_silgen_name("LLVMFuzzerRunDriver")
private func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt
#endif

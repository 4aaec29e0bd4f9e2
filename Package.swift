// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "DataProtection",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DataProtection", targets: ["DataProtection"]),
        .library(name: "DataProtectionSQLite", targets: ["DataProtectionSQLite"]),
        .library(name: "DataProtectionGRDB", targets: ["DataProtectionGRDB"]),
        .library(name: "DataProtectionAgent", targets: ["DataProtectionAgent"]),
        .library(name: "DataProtectionBackup", targets: ["DataProtectionBackup"]),
        .library(name: "DataProtectionScenarios", targets: ["DataProtectionScenarios"]),
        .library(name: "DataProtectionScenarioTesting", targets: ["DataProtectionScenarioTesting"]),
        .executable(name: "dpctl", targets: ["dpctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // `swift package benchmark` (Benchmarks/). Without the Linux runtime interposer trait, which needs a package
        // that is not mirrored here.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // `swift package generate-documentation` (the DocC catalogs in Sources/*/*.docc).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // libsodium from the system (Debian: libsodium-dev). Only SodiumBridge imports it.
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]
        ),
        // The one place that touches C and unsafe pointers: secure memory, AEAD,
        // X25519, Argon2id, keyed BLAKE2b and randomness.
        .target(
            name: "SodiumBridge",
            dependencies: ["CSodium"]
        ),
        // tpm2-tss from the system (Debian: libtss2-dev): ESAPI, the TCTI loader, response
        // codes and marshalling. Only TPMBridge imports it.
        .systemLibrary(
            name: "CTSS",
            providers: [.apt(["libtss2-dev"])]
        ),
        // The one place that talks to a TPM 2.0: the storage root key, HMAC key objects, NV
        // indexes and counters, response codes as Swift errors (Keys/key-hierarchy.md §4.4).
        .target(
            name: "TPMBridge",
            dependencies: ["CTSS", "SodiumBridge"]
        ),
        // SQLite from the system (Debian: libsqlite3-dev). Only SQLiteBridge imports it.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        // The one place that touches SQLite's C API: the VFS callbacks over a Swift storage
        // protocol, process-local locks and WAL shared memory, and a small connection type.
        .target(
            name: "SQLiteBridge",
            dependencies: ["CSQLite", "SodiumBridge"]
        ),
        // The socket and process calls Swift cannot make itself (SCM_RIGHTS, SO_PEERCRED, prctl).
        // Only SocketBridge includes it.
        .target(name: "CSocket"),
        // free(3) and realloc(3) that wipe what they release, once the process asks
        // (`ProcessProtection.wipeFreedMemory()`): linked into dpctl only, never into a library,
        // whose users' allocators it would otherwise override.
        .target(name: "CFreedMemoryWiping"),
        // The one place for socket syscalls and their pointers: Unix-domain sockets with
        // descriptor passing and peer credentials, and process hardening.
        .target(
            name: "SocketBridge",
            dependencies: ["CSocket"]
        ),
        // libsystemd from the system (Debian: libsystemd-dev): sd-bus and sd_notify. Only DBusBridge imports it.
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // The one place that touches sd-bus: a bus connection with its own dispatch thread,
        // method calls, signal matches, exported objects, a typed value model; and sd_notify.
        .target(
            name: "DBusBridge",
            dependencies: ["CSystemd"]
        ),
        // OpenSSL's libcrypto from the system (Debian: libssl-dev). Only CryptoBridge imports it.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // The one place that touches libcrypto: what libsodium lacks for the Secret Service
        // (the 1024-bit MODP Diffie-Hellman group, AES-128-CBC with PKCS#7, HKDF-SHA-256).
        .target(
            name: "CryptoBridge",
            dependencies: ["COpenSSL", "SodiumBridge"]
        ),
        // The agent (one owner serving a store to other processes) and its client.
        .target(
            name: "DataProtectionAgent",
            dependencies: [
                "DataProtection", "DataProtectionSQLite", "DataProtectionBackup", "SQLiteBridge", "SocketBridge", "SodiumBridge", "DBusBridge",
                "CryptoBridge",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Backups of a whole store in the age format (age v1 + pax tar), over any ProtectedFileSystem.
        .target(
            name: "DataProtectionBackup",
            dependencies: ["DataProtection", "DataProtectionSQLite", "SodiumBridge", .product(name: "SystemPackage", package: "swift-system")]
        ),
        // Protected SQLite databases: the store as SQLite's file system (`ProtectedDatabase`).
        .target(
            name: "DataProtectionSQLite",
            dependencies: ["DataProtection", "SQLiteBridge", "SodiumBridge", .product(name: "SystemPackage", package: "swift-system")]
        ),
        // GRDB's DatabaseQueue and DatabasePool on a protected database.
        .target(
            name: "DataProtectionGRDB",
            dependencies: ["DataProtection", "DataProtectionSQLite", "SQLiteBridge", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .target(
            name: "DataProtection",
            dependencies: [
                "SodiumBridge",
                "TPMBridge",
                "SocketBridge",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The scenario language: parser, runner, reports and the Swift `Timeline` API.
        .target(
            name: "DataProtectionScenarios",
            dependencies: ["DataProtection", "DataProtectionSQLite", "SodiumBridge"]
        ),
        // `Timeline.assertPasses()` for Swift Testing, apart so that `dpctl` does not link Testing.
        .target(
            name: "DataProtectionScenarioTesting",
            dependencies: ["DataProtectionScenarios"]
        ),
        // The workloads and baselines shared by `dpctl bench` and the Benchmarks/ suite.
        .target(
            name: "StoreBenchmarking",
            dependencies: [
                "DataProtection",
                "TPMBridge",
                "DataProtectionAgent",
                "DataProtectionBackup",
                "DataProtectionSQLite",
                "DBusBridge",
                "SQLiteBridge",
                "SodiumBridge",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .executableTarget(
            name: "dpctl",
            dependencies: [
                "CFreedMemoryWiping",
                "DataProtection",
                "DataProtectionAgent",
                "DataProtectionBackup",
                "DataProtectionScenarios",
                "DataProtectionSQLite",
                "SodiumBridge",
                "StoreBenchmarking",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The child process of the crash-consistency harness (killed with SIGKILL at random
        // instants by Tests/DataProtectionTests/Reliability/CrashHarnessTests.swift).
        .executableTarget(
            name: "CrashWorker",
            dependencies: ["DataProtection", "DataProtectionScenarios", "DataProtectionSQLite"],
            path: "Tests/CrashWorker"
        ),
        // `swift package benchmark`: the store next to its baselines (Benchmarks/StoreBenchmarks).
        .executableTarget(
            name: "StoreBenchmarks",
            dependencies: [
                "StoreBenchmarking",
                "DataProtection",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/StoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Fuzzing (`.ci/fuzz`, README "Security"): the entry points, and `dpfuzz`, which runs them
        // under libFuzzer in a fuzz build and replays inputs in an ordinary one.
        .target(
            name: "DataProtectionFuzzing",
            dependencies: ["DataProtection", "DataProtectionScenarios", "DataProtectionAgent", "DataProtectionBackup", "SodiumBridge",
                           .product(name: "SystemPackage", package: "swift-system")],
            path: "Tests/Fuzz/Entries"
        ),
        .executableTarget(
            name: "dpfuzz",
            dependencies: ["DataProtectionFuzzing"],
            path: "Tests/Fuzz/Driver"
        ),
        // Test support shared by test targets: running this build's programs with their output
        // captured, and private D-Bus buses with python-dbusmock's logind and screensaver.
        .target(
            name: "TestSupport",
            path: "Tests/TestSupport"
        ),
        // The README's first Swift example, verbatim, as a consumer's program (Tests/ReadmeTests checks both agree).
        .executableTarget(
            name: "ReadmeExample",
            dependencies: ["DataProtection"],
            path: "Tests/ReadmeExample"
        ),
        // The README as a newcomer meets it: its examples run as written, its links resolve, and a
        // consumer uses every product it shows.
        .testTarget(
            name: "ReadmeTests",
            dependencies: ["ReadmeExample", "dpctl", "TestSupport", "DataProtection", "DataProtectionSQLite", "DataProtectionGRDB",
                           "DataProtectionAgent", "DataProtectionBackup", "DataProtectionScenarios", "DataProtectionScenarioTesting",
                           .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "TPMBridgeTests",
            dependencies: ["TPMBridge", "SodiumBridge"]
        ),
        .testTarget(
            name: "SodiumBridgeTests",
            dependencies: ["SodiumBridge"]
        ),
        .testTarget(
            name: "CryptoBridgeTests",
            dependencies: ["CryptoBridge", "SodiumBridge"]
        ),
        .testTarget(
            name: "DBusBridgeTests",
            dependencies: ["DBusBridge", "TestSupport"]
        ),
        .testTarget(
            name: "DataProtectionTests",
            dependencies: ["DataProtection", "SodiumBridge", "TPMBridge", "DataProtectionFuzzing", "DataProtectionScenarios", "DataProtectionSQLite",
                           .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "DataProtectionScenariosTests",
            dependencies: ["DataProtectionScenarios", "DataProtectionScenarioTesting", "DataProtection"]
        ),
        .testTarget(
            name: "DataProtectionSQLiteTests",
            dependencies: ["DataProtectionSQLite", "DataProtectionGRDB", "DataProtection", "SQLiteBridge", "DataProtectionScenarios",
                           .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "DataProtectionBackupTests",
            dependencies: ["DataProtectionBackup", "DataProtection", "DataProtectionSQLite", "SodiumBridge"]
        ),
        .testTarget(
            name: "DataProtectionAgentTests",
            dependencies: ["DataProtectionAgent", "TestSupport", "DataProtection", "DataProtectionBackup", "DataProtectionSQLite", "SocketBridge", "DataProtectionFuzzing"]
        ),
        .testTarget(
            name: "dpctlTests",
            dependencies: ["dpctl", "TestSupport", "DataProtection", "SocketBridge", "TPMBridge"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

import DataProtection
import DataProtectionScenarios
import DataProtectionSQLite
import Foundation

/// The child of the crash-consistency harness (`Tests/DataProtectionTests/Reliability/CrashHarnessTests.swift`).
///
/// `CrashWorker <directory> <seed> <passcode>` opens (or creates) the device and
/// store in `<directory>`, unlocks with `<passcode>`, then does random work for
/// ever: atomic puts, handle writes with and without `synchronize()`, truncates,
/// class changes, renames, removals, passcode changes, and the device's lock (with a
/// handle open: its flush at key discard), reboot and erase. Before each operation
/// it prints `B <operation>` and after it returns `A`, one line per `write(2)` to
/// standard output, so the parent knows exactly what was acknowledged when it
/// kills the worker with SIGKILL. The operations follow from `<seed>` (SplitMix64),
/// so a run is reproduced by its seed (the instant of the kill is not).
///
/// Operations (paths are store paths, classes their letters, contents `seed:length`
/// pattern bytes, which the parent regenerates):
///
///     put <path> <class> <seed> <length>      ProtectedStore.write (atomic)
///     open <path>                              a handle for updating
///     write <offset> <seed> <length>           on the open handle (cached until flushed)
///     sync                                     handle.synchronize()
///     truncate <size>                          handle.truncate (commits at once)
///     close                                    handle.close() (flushes durably)
///     class <path> <class>                     setProtectionClass
///     move <from> <to>
///     remove <path>
///     passcode <new>                           changePasscode(from: current, to: new)
///     lock                                     device.lock() (grace 0), then unlock: a class A handle is flushed
///     reboot                                   device.reboot() (handles flushed and closed), then unlock
///     erase <new>                              device.erase(), then unlock, setPasscode(new), mkdir /d
@main
struct CrashWorker {
    static let names = ["/f0", "/f1", "/f2", "/d/f3", "/d/f4", "/d/f5"]
    static let classes: [(String, ProtectionClass)] = [
        ("A", .complete), ("B", .completeUnlessOpen), ("C", .completeUntilFirstUserAuthentication),
        ("CX", .completeWhenUserInactive), ("D", .none),
    ]

    static func main() {
        let arguments = CommandLine.arguments
        guard arguments.count == 4 || (arguments.count == 5 && ["sqlite", "sqlite-move", "items"].contains(arguments[4])),
              let seed = UInt64(arguments[2]) else {
            FileHandle.standardError.write(Data("usage: CrashWorker <directory> <seed> <passcode> [sqlite | sqlite-move | items]\n".utf8))
            exit(2)
        }
        do {
            if arguments.count == 5, arguments[4] == "items" {
                try runItems(directory: URL(fileURLWithPath: arguments[1]), seed: seed, passcode: arguments[3])
            }
            if arguments.count == 5 {
                try runSQLite(directory: URL(fileURLWithPath: arguments[1]), seed: seed, passcode: arguments[3], moving: arguments[4] == "sqlite-move")
            }
            try run(directory: URL(fileURLWithPath: arguments[1]), seed: seed, passcode: arguments[3])
        } catch {
            FileHandle.standardError.write(Data("CrashWorker: \(error)\n".utf8))
            exit(1)
        }
    }

    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func run(directory: URL, seed: UInt64, passcode: String) throws {
        let configuration = DeviceConfiguration(passcodeCost: .minimal)
        let store = try ProtectedStore(directory: directory, configuration: configuration)
        let device = store.device
        try device.unlock(passcode: passcode)
        if !store.fileExists(atPath: "/d") { try store.createDirectory(atPath: "/d") }
        say("READY")
        var random = SplitMix64(seed: seed)
        var current = passcode
        var handle: (path: String, handle: ProtectedFileHandle, size: UInt64)?
        var counter = 0
        while true {
            counter += 1
            let roll = random.next(100)
            if let open = handle {
                // A handle is open: write, sync, truncate or close it.
                switch roll {
                case 0..<50:
                    // Mostly small writes (under 32 chunks: cached until `sync`); one in ten is large
                    // (up to 76 chunks: sealed straight from the data, a full cache flushed as a
                    // deferred append or with a journal).
                    let offset = UInt64(random.next(Int(min(open.size, 200_000)) + 20_000))
                    let length = 1 + random.next(roll < 5 ? 1_250_000 : 40_000)
                    let dataSeed = random.next()
                    say("B write \(offset) \(dataSeed) \(length)")
                    try open.handle.write(contentsOf: pattern(length, seed: dataSeed), atOffset: offset)
                    handle?.size = max(open.size, offset + UInt64(length))
                case 50..<70:
                    say("B sync")
                    try open.handle.synchronize()
                case 70..<80:
                    let size = UInt64(random.next(Int(open.size) + 1))
                    say("B truncate \(size)")
                    try open.handle.truncate(atOffset: size)
                    handle?.size = size
                case 80..<84:
                    // The lock's flush: what the handle cached is written before the class A key goes.
                    say("B lock")
                    try device.lock()
                    try device.unlock(passcode: current)
                case 84..<87:
                    say("B reboot")
                    try device.reboot()
                    handle = nil
                    try device.unlock(passcode: current)
                default:
                    say("B close")
                    try open.handle.close()
                    handle = nil
                }
                say("A")
                continue
            }
            let existing = names.filter { store.fileExists(atPath: $0) }
            let missing = names.filter { !existing.contains($0) }
            switch roll {
            case 0..<35:
                let path = names[random.next(names.count)]
                let (letter, protectionClass) = classes[random.next(classes.count)]
                let length = random.next(4) == 0 ? random.next(200_000) : random.next(40_000)
                let dataSeed = random.next()
                say("B put \(path) \(letter) \(dataSeed) \(length)")
                try store.write(pattern(length, seed: dataSeed), to: path, protection: ProtectionChoice(protectionClass))
            case 35..<55 where !existing.isEmpty:
                let path = existing[random.next(existing.count)]
                say("B open \(path)")
                let opened = try store.openFile(atPath: path)
                handle = (path, opened, try opened.size())
            case 55..<65 where !existing.isEmpty:
                let path = existing[random.next(existing.count)]
                let (letter, protectionClass) = classes[random.next(classes.count)]
                say("B class \(path) \(letter)")
                try store.setProtectionClass(protectionClass, ofItemAtPath: path)
            case 65..<78 where !existing.isEmpty && !missing.isEmpty:
                let from = existing[random.next(existing.count)]
                let to = missing[random.next(missing.count)]
                say("B move \(from) \(to)")
                try store.moveItem(atPath: from, toPath: to)
            case 78..<88 where !existing.isEmpty:
                let path = existing[random.next(existing.count)]
                say("B remove \(path)")
                try store.removeItem(atPath: path)
            case 88..<95:
                let new = "p\(seed % 100_000)-\(counter)"
                say("B passcode \(new)")
                try device.changePasscode(from: current, to: new)
                current = new
            case 95..<96:
                let new = "e\(seed % 100_000)-\(counter)"
                say("B erase \(new)")
                try device.erase()
                try device.unlock()
                try device.setPasscode(new)
                current = new
                try store.createDirectory(atPath: "/d")
            case 96..<98:
                say("B reboot")
                try device.reboot()
                try device.unlock(passcode: current)
            default:
                continue
            }
            say("A")
        }
    }

    /// `CrashWorker <directory> <seed> <passcode> sqlite`: transactions on a protected
    /// database `/db/app.db` (class `complete`; WAL for odd seeds, else the rollback journal;
    /// `synchronous=FULL`), for ever. Each transaction inserts its rows
    /// `(tx, n, payload)` and commits: `B tx <tx> <rows>` before, `A` once the commit has
    /// returned. One transaction in eight is large enough to spill pages into the database
    /// file before it commits. The first `tx` is one more than the largest in the database.
    ///
    /// `… sqlite-move`: the same on a database that moves while open (``movingPlaces``): it is
    /// opened wherever it is, and moved (its file, or its directory) before its first write of
    /// the run when the seed's bit 1 is set, and then between transactions now and then:
    /// `B mv <from> <to>` before a move, `A` once it has returned.
    static func runSQLite(directory: URL, seed: UInt64, passcode: String, moving: Bool) throws {
        let store = try ProtectedStore(directory: directory, configuration: DeviceConfiguration(passcodeCost: .minimal))
        try store.device.unlock(passcode: passcode)
        var place = moving ? movingPlaces.first { store.fileExists(atPath: $0) } ?? movingPlaces[0] : "/db/app.db"
        let database = try ProtectedDatabase(atPath: place, in: store, create: true, protection: .complete,
                                             journalMode: seed % 2 == 1 ? .wal : .rollback)
        var random = SplitMix64(seed: seed)
        func move() throws {
            // Its file (renamed in its directory) or its directory, in turn.
            let index = movingPlaces.firstIndex(of: place)!
            let next = movingPlaces[(index + 1) % movingPlaces.count]
            let (from, to) = index % 2 == 0 ? (place, next) : (String(place.split(separator: "/")[0]), String(next.split(separator: "/")[0]))
            say("B mv /\(from.trimmingCharacters(in: ["/"])) /\(to.trimmingCharacters(in: ["/"]))")
            try store.moveItem(atPath: from, toPath: to)
            say("A")
            place = next
        }
        if moving { say("READY") }
        if moving, seed & 2 != 0 { try move() }  // before the first write of this run
        try database.execute("PRAGMA synchronous=FULL; PRAGMA cache_size=20")
        try database.execute("CREATE TABLE IF NOT EXISTS row(tx INTEGER NOT NULL, n INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (tx, n))")
        var tx: Int64 = 0
        if case .integer(let largest)? = try database.query("SELECT max(tx) FROM row").first?.values.first { tx = largest }
        if !moving { say("READY") }
        while true {
            if moving, random.next(4) == 0 { try move() }
            tx += 1
            let rows = random.next(8) == 0 ? 200 + random.next(400) : 1 + random.next(20)
            say("B tx \(tx) \(rows)")
            try database.execute("BEGIN")
            for n in 0..<rows {
                try database.execute("INSERT INTO row(tx, n, payload) VALUES (?, ?, ?)",
                                     [.integer(tx), .integer(Int64(n)), .blob(pattern(100 + random.next(1500), seed: random.next()))])
            }
            try database.execute("COMMIT")
            say("A")
        }
    }

    /// `items`: keychain items added, updated and deleted for ever, each change announced
    /// `B add <key> <accessibility> <secret seed> <secret length>`, `B update <key> <seed> <length>`
    /// or `B delete <key>`, then `A` once it returned (the item's attribute `key` is `<key>`).
    static func runItems(directory: URL, seed: UInt64, passcode: String) throws {
        let store = try ProtectedStore(directory: directory, configuration: DeviceConfiguration(passcodeCost: .minimal))
        try store.device.unlock(passcode: passcode)
        let keychain = store.keychain
        let accessibilities: [ItemAccessibility] = [.whenUnlocked, .afterFirstUnlock, .whenPasscodeSetThisDeviceOnly, .afterFirstUnlockThisDeviceOnly]
        var present = Set(try keychain.items(matching: [:]).items.compactMap { $0.attributes["key"].flatMap(Int.init) })
        var random = SplitMix64(seed: seed)
        say("READY")
        while true {
            let key = random.next(24)
            let secretSeed = random.next()
            let length = 1 + random.next(random.next(8) == 0 ? 4000 : 64)
            let secret = ItemSecret(bytes: pattern(length, seed: secretSeed))
            if !present.contains(key) {
                let accessibility = accessibilities[random.next(accessibilities.count)]
                say("B add \(key) \(accessibility.rawValue) \(secretSeed) \(length)")
                try keychain.add(secret, label: "item \(key)", attributes: ["key": "\(key)", "kind": "harness"], accessibility: accessibility)
                present.insert(key)
            } else if random.next(3) == 0, let item = try keychain.items(matching: ["key": "\(key)"]).items.first {
                // An accessibility change, into another domain mostly (a move between databases).
                let accessibility = accessibilities.filter { $0 != item.accessibility }[random.next(accessibilities.count - 1)]
                say("B move \(key) \(accessibility.rawValue)")
                try keychain.updateItem(withID: item.id, accessibility: accessibility)
            } else if random.next(3) == 0 {
                say("B delete \(key)")
                try keychain.delete(matching: ["key": "\(key)"])
                present.remove(key)
            } else {
                say("B update \(key) \(secretSeed) \(length)")
                try keychain.update(matching: ["key": "\(key)"], label: "item \(key) v\(secretSeed % 1000)", secret: secret)
            }
            say("A")
        }
    }

    /// Where the database of `sqlite-move` lives, in turn: a move of its file takes it from an
    /// even index to the next, a move of its directory from an odd one.
    static let movingPlaces = ["/db/app.db", "/db/moved.db", "/dbm/moved.db", "/dbm/app.db"]

    /// Deterministic bytes for `(seed, count)`: the parent regenerates them to know what was written.
    static func pattern(_ count: Int, seed: UInt64) -> Data {
        Data(SplitMix64.bytes(count: count, seed: seed))
    }
}

extension SplitMix64 {
    /// A number in `0..<bound` (0 when `bound` is at most 1).
    mutating func next(_ bound: Int) -> Int { bound <= 1 ? 0 : Int(next() % UInt64(bound)) }
}

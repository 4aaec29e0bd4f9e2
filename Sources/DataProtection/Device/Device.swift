import Foundation
import Logging
import SodiumBridge
import SystemPackage

/// A simulated iOS device: the keybag, the lock state and the rules of
/// Data Protection (see `semantics.md`).
///
/// A device lives in a directory of its own (its "hardware": the device key,
/// the effaceable key, the keybag and the attempt counter). Creating a
/// `Device` boots it: the state is ``DeviceState/booted``, only class
/// ``ProtectionClass/none`` is available until the first ``unlock(passcode:)-560gu``.
///
/// All methods are thread-safe. `lock`, `unlock`, passcode changes, expiries,
/// `reboot`, `crash` and `erase` are linearizable: each takes effect at one
/// instant between its call and its return.
public final class Device: Sendable {
    /// The rules this device follows.
    public let configuration: DeviceConfiguration
    /// The clock grace periods, inactivity and passcode delays are measured on.
    public let clock: any DeviceClock
    /// The device directory.
    public let directory: URL

    let files: DeviceFiles
    /// Whether this device was made when this object opened its directory (nothing was there).
    let wasCreated: Bool
    /// This process's exclusive ownership of the device directory, held for the device's lifetime.
    let ownership: OwnershipLock
    /// The file system the device files, and the files of a store on this device, go through.
    package var fileSystem: any FileSystem { files.fileSystem }
    let hierarchy: KeyHierarchy
    /// Serialises state transitions; recursive so that observers may query the device.
    let transition = NSRecursiveLock()
    let core: Locked<Core>
    let subscribers = Locked(Subscribers())
    /// ``DeviceConfiguration/logger``.
    var logger: Logger { configuration.logger }

    /// Everything that changes with the lock state.
    struct Core: Sendable {
        var state: DeviceState = .booted
        /// The effaceable key the keybag is sealed under, and its slot in the `effaceable` file.
        var effaceable: SecureBytes
        var effaceableSlot: Int
        var sealKey: SecureBytes
        var counterKey: SecureBytes
        var keybag: Keybag
        var keys = ClassKeyring()
        var attempts: AttemptRecord
        /// When each slot's key is to be discarded (set by `lock`, cleared by `unlock`).
        var deadlines: [KeybagSlot: DeviceInstant] = [:]
        var wakes: [ClockWakeToken] = []
        /// Bumped by every lock and unlock, so that an expiry racing an observer's
        /// unlock (or a lock racing an observer's unlock) does not act on a stale state.
        var generation: UInt64 = 0
        /// Set when a restart or erase failed half-way: memory no longer matches
        /// the disk, so nothing may be unlocked until a successful reboot.
        var needsReboot: DataProtectionError?
    }

    /// Opens (or creates) the device in `directory` and boots it.
    ///
    /// The device then owns the directory until it is released from memory (or the
    /// process ends): one process at a time holds a device's live state. Opening a
    /// device owned by another process waits up to ``DeviceConfiguration/ownershipTimeout``;
    /// one owned by another `Device` of this process fails at once. Missing directories
    /// above `directory` are created, closed to others (0700).
    ///
    /// - Throws: ``DataProtectionError/Code/storeBusy`` if the directory stayed owned
    ///   by someone else for the whole timeout (the message names the owner's pid);
    ///   ``DataProtectionError/Code/integrityFailure`` if the device files
    ///   were tampered with; ``DataProtectionError/Code/ioFailure`` if they cannot be read or written.
    public convenience init(
        directory: URL,
        clock: any DeviceClock = SystemClock.shared,
        configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) {
        try ParentDirectories.create(above: FilePath(directory.path))
        try self.init(directory: FilePath(directory.path), clock: clock, configuration: configuration, fileSystem: PosixFileSystem())
    }

    /// Creates a new device in `directory` with `passcode` set from the start, and boots it
    /// (``DeviceState/booted``: the first ``unlock(passcode:)-560gu`` makes its keys available).
    ///
    /// The keybag written is the passcode's from the first byte: unlike creating a device and
    /// then calling ``setPasscode(_:)-8s9r``, no keybag that opens without the passcode ever exists.
    ///
    /// - Throws: ``DataProtectionError/Code/fileExists`` if a device is already there;
    ///   ``DataProtectionError/Code/invalidArgument`` for an empty passcode or one with a NUL;
    ///   the errors of ``init(directory:clock:configuration:)``.
    public convenience init(
        creatingAt directory: URL,
        passcode: Passcode,
        clock: any DeviceClock = SystemClock.shared,
        configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) {
        try ParentDirectories.create(above: FilePath(directory.path))
        try self.init(directory: FilePath(directory.path), clock: clock, configuration: configuration,
                      fileSystem: PosixFileSystem(), creatingWithPasscode: passcode)
    }

    /// Creates a new device with the UTF-8 bytes of `passcode` set from the start, as the
    /// `Passcode` overload does.
    public convenience init(
        creatingAt directory: URL,
        passcode: String,
        clock: any DeviceClock = SystemClock.shared,
        configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) {
        try self.init(creatingAt: directory, passcode: Passcode(passcode), clock: clock, configuration: configuration)
    }

    /// Opens (or creates) the device on an injected file system (fault and crash tests);
    /// with `creatingWithPasscode`, creates it with that passcode (`fileExists` if there is one).
    package init(
        directory: FilePath, clock: any DeviceClock, configuration: DeviceConfiguration, fileSystem: any FileSystem,
        creatingWithPasscode newPasscode: Passcode? = nil
    ) throws(DataProtectionError) {
        try configuration.validate()
        self.configuration = configuration
        self.clock = clock
        self.directory = URL(fileURLWithPath: directory.string, isDirectory: true)
        // Secure memory beyond RLIMIT_MEMLOCK is silently left swappable: said once per process,
        // through the logger of the first device.
        let logger = configuration.logger
        MemoryLocking.onFirstFailure { message in logger.warning("\(message)") }
        var files = DeviceFiles(directory: directory, fileSystem: fileSystem)
        try fileSystem.createDirectory(at: directory)
        // Ownership first: debris is cleaned, and the device files read, only by the owner.
        self.ownership = try OwnershipLock.acquire(in: directory, timeout: configuration.ownershipTimeout)
        try files.removeDebris()
        let hasEffaceableKey = try files.exists(files.effaceable)
        let hasKeybag = try files.exists(files.keybag)
        let fresh = !hasEffaceableKey && !hasKeybag
        let deviceKey: any DeviceKeyProvider = if let provider = configuration.deviceKeyProvider {
            provider
        } else if try files.exists(files.tpm) || (fresh && configuration.deviceKeyKind == .tpm) {
            // The device directory records a TPM device key; a fresh one takes the configuration's choice.
            try TPMDeviceKey.open(files: files, tcti: configuration.tpmTCTI, create: fresh)
        } else {
            try FileDeviceKey.load(at: files.uid, fileSystem: fileSystem, create: fresh)
        }
        if let tpm = deviceKey as? TPMDeviceKey, tpm.keepsEffaceableKey {
            files.effaceableNV = tpm
        }
        let hierarchy = KeyHierarchy(deviceKey: deviceKey)
        let booted: Core
        if let newPasscode {
            guard fresh else {
                throw DataProtectionError(.fileExists, "A device already exists in \(directory).",
                                          hint: "Open it instead, or erase it to start afresh (all data is lost).")
            }
            let passcode = try Self.validated(newPasscode)
            booted = try Self.createFresh(files: files, hierarchy: hierarchy,
                                          passcode: (passcode, try configuration.passcodeCost.parameters()))
        } else {
            booted = try Self.boot(files: files, hierarchy: hierarchy, now: clock.now, logger: configuration.logger)
        }
        self.files = files
        self.hierarchy = hierarchy
        self.core = Locked(booted)
        self.wasCreated = fresh
    }

    deinit {
        core.withLock { core in
            core.wakes.forEach { $0.cancel() }
            core.keys.discardAll()
        }
        subscribers.withLock { subscribers in
            subscribers.streams.values.forEach { $0.finish() }
        }
    }

    // MARK: - State

    /// The lock state.
    public var state: DeviceState {
        expireDue()
        return core.withLock { $0.state }
    }

    /// Whether protected data is available: exactly while the class A (`complete`) key is in memory.
    public var isProtectedDataAvailable: Bool { isAvailable(.complete) }

    /// Whether an existing, closed file of `protectionClass` can be opened now.
    public func isAvailable(_ protectionClass: ProtectionClass) -> Bool {
        expireDue()
        return hasClassKey(for: protectionClass)
    }

    /// What holds the device key: the `uid` file or a TPM, as recorded when the device was
    /// created; `nil` for a ``DeviceConfiguration/deviceKeyProvider`` of the program's own.
    public var deviceKeyKind: DeviceKeyKind? {
        switch hierarchy.deviceKey {
        case is TPMDeviceKey: .tpm
        case is FileDeviceKey: .file
        default: nil
        }
    }

    /// The TPM commands sent for this device so far (`nil` without a TPM device key): `dpctl bench`.
    package var tpmCommandCount: Int? {
        (hierarchy.deviceKey as? TPMDeviceKey)?.commandCount
    }

    /// Whether a passcode is set.
    public var hasPasscode: Bool {
        core.withLock { $0.keybag.passcode != .none }
    }

    /// The Argon2id parameters of the current passcode (`nil` without a passcode).
    public var passcodeDerivation: (operations: UInt64, memoryBytes: UInt64)? {
        core.withLock { core in
            if case .argon2id(_, let operations, let memory) = core.keybag.passcode { return (operations, memory) }
            return nil
        }
    }

    /// The consecutive failed passcode attempts (kept across restarts).
    public var failedPasscodeAttempts: Int {
        core.withLock { Int($0.attempts.failures) }
    }

    /// When the next passcode attempt is allowed; `nil` if it is allowed now.
    public var nextPasscodeAttemptAllowed: DeviceInstant? {
        let now = clock.now
        return core.withLock { core in
            guard let allowed = Self.nextAttempt(after: core.attempts), allowed > now else { return nil }
            return allowed
        }
    }

    /// When the next class key is discarded: the end of the grace period, or of the
    /// inactivity period, after a lock (`nil`: no discard pending).
    public var nextKeyDiscard: DeviceInstant? {
        expireDue()
        return core.withLock { $0.deadlines.values.min() }
    }

    // MARK: - Lock and unlock

    /// Unlocks the device with `passcode` (`nil`: a bare unlock, an attempt with the empty passcode).
    ///
    /// From ``DeviceState/booted`` or ``DeviceState/locked``, every class key is
    /// loaded and ``DeviceNotification/protectedDataDidBecomeAvailable`` posted.
    /// When already unlocked, a right passcode changes nothing.
    ///
    /// - Throws: ``DataProtectionError/Code/incorrectPasscode`` (the failure is counted,
    ///   unless it repeats the previous wrong passcode; a passcode given to a device without
    ///   one is refused with this code too, and not counted); ``DataProtectionError/Code/passcodeAttemptsDelayed``
    ///   inside an escalating delay (not counted); ``DataProtectionError/Code/deviceErased`` when
    ///   the failure reaches ``DeviceConfiguration/eraseAfterFailedAttempts``.
    public func unlock(passcode: Passcode?) throws(DataProtectionError) {
        transition.lock()
        defer { transition.unlock() }
        expireDue()
        if let passcode, passcode.bytes.count > 0, !hasPasscode {
            // Not an attempt: nothing to guess, and counting it would let a stray passcode
            // (a script's variable) walk a device without one toward erase-after-N.
            throw DataProtectionError(
                .incorrectPasscode, "This device has no passcode, and one was given (not counted as an attempt).",
                hint: "Unlock without a passcode, or set one first (setPasscode(_:), `dpctl passcode set`).")
        }
        let keys = try verifyPasscode(passcode?.bytes ?? SecureBytes(count: 0))
        let wasUnlocked = core.withLock { core in
            // Keys still in memory (already unlocked, or inside the grace period) stay
            // as they are: a caller may be using them.
            for (slot, key) in keys {
                if core.keys.key(slot) == nil { core.keys.install(key, in: slot) } else { key.wipe() }
            }
            core.deadlines.removeAll()
            core.wakes.forEach { $0.cancel() }
            core.wakes.removeAll()
            core.generation &+= 1
            defer { core.state = .unlocked }
            return core.state == .unlocked
        }
        if !wasUnlocked {
            logger.debug("device unlocked")
            post(.protectedDataDidBecomeAvailable)
        }
    }

    /// Unlocks the device with the UTF-8 bytes of `passcode` (`nil`: a bare unlock), as the
    /// `Passcode` overload does.
    public func unlock(passcode: String? = nil) throws(DataProtectionError) {
        try unlock(passcode: passcode.map(Passcode.init(_:)))
    }

    /// Locks the device.
    ///
    /// Posts ``DeviceNotification/protectedDataWillBecomeUnavailable`` at once
    /// (observers run before any key goes); the class A and B secret keys are
    /// discarded at `now + gracePeriod`, the class CX key at `now + inactivityPeriod`,
    /// unless the device is unlocked first. Does nothing unless unlocked.
    ///
    /// Throws like `AgentDevice.lock()` (DataProtectionAgent) does, so that code written against
    /// ``DeviceControlling`` treats both alike: a device that keeps its keys in hardware or in
    /// another process can fail to lock (`ioFailure`), and a caller must never assume a lock
    /// that did not happen. This in-process device has no such failure today.
    public func lock() throws(DataProtectionError) {
        transition.lock()
        defer { transition.unlock() }
        expireDue()
        let now = clock.now
        let generation: UInt64? = core.withLock { core in
            guard core.state == .unlocked else { return nil }
            core.state = .locked
            core.generation &+= 1
            return core.generation
        }
        guard let generation else { return }
        logger.debug("device locked")
        post(.protectedDataWillBecomeUnavailable)
        let grace = now + configuration.gracePeriod
        let inactivity = now + configuration.inactivityPeriod
        let stillLocked = core.withLock { core in
            // An observer may have unlocked again: then this lock is over.
            guard core.generation == generation else { return false }
            core.deadlines = [.complete: grace, .completeUnlessOpenSecret: grace, .completeWhenUserInactive: inactivity]
            return true
        }
        guard stillLocked else { return }
        expireDue()
    }

    // MARK: - Expiry

    /// Discards every key whose deadline has passed, after letting lifecycle
    /// observers (open handles) flush with the key still present, and arms a
    /// wake-up for the next deadline.
    func expireDue() {
        transition.lock()
        defer { transition.unlock() }
        let now = clock.now
        while true {
            // Take the due slots out of `deadlines` first: an observer that queries the
            // device re-enters here and must find nothing left to do.
            let due: (slots: [KeybagSlot], generation: UInt64)? = core.withLock { core in
                guard let first = core.deadlines.values.filter({ $0 <= now }).min() else { return nil }
                let slots = core.deadlines.filter { $0.value == first }.map(\.key)
                for slot in slots { core.deadlines.removeValue(forKey: slot) }
                return (slots, core.generation)
            }
            guard let due else { break }
            let classes = Set(due.slots.compactMap(\.protectionClass))
            for observer in lifecycleObservers() {
                observer.deviceWillDiscardKeys(of: classes)
            }
            let discarded = core.withLock { core in
                // An observer that unlocked the device keeps the keys.
                guard core.generation == due.generation else { return false }
                core.keys.discard(due.slots)
                return true
            }
            if discarded {
                logger.debug("class keys discarded", metadata: ["classes": "\(classes.map(\.rawValue).sorted())"])
            }
        }
        armNextWake()
    }

    /// Schedules one wake-up at the earliest pending deadline (re-armed after
    /// every expiry, so a wake that fires early is never lost).
    private func armNextWake() {
        core.withLock { core in
            core.wakes.forEach { $0.cancel() }
            core.wakes.removeAll()
            guard let next = core.deadlines.values.min() else { return }
            core.wakes.append(clock.wake(at: next) { [weak self] in self?.expireDue() })
        }
    }

    /// Runs `body` with the class key (for class B: the secret key) if it is in
    /// memory and not past its deadline; returns `nil` without calling `body` otherwise.
    ///
    /// The key cannot be wiped while `body` runs. `body` must be short and must not
    /// call back into the device.
    package func withClassKey<R>(
        for protectionClass: ProtectionClass, _ body: (SecureBytes) throws(DataProtectionError) -> R
    ) throws(DataProtectionError) -> R? {
        let now = clock.now
        let slot = KeybagSlot(protectionClass)
        return try core.withLock { core throws(DataProtectionError) -> R? in
            if !core.deadlines.isEmpty, let deadline = core.deadlines[slot], deadline <= now { return nil }
            guard let key = core.keys.key(slot) else { return nil }
            return try body(key)
        }
    }

    /// The `protectedDataUnavailable` error for `protectionClass`, saying why its key is not
    /// in memory now: before the first unlock since boot, locked, or locked past the
    /// inactivity period.
    func classUnavailable(_ protectionClass: ProtectionClass) -> DataProtectionError {
        // The state as recorded, without expiring deadlines here: callers may hold a file's lock,
        // and an expiry flushes handles.
        let reason = switch core.withLock({ $0.state }) {
        case .booted: "the device has not been unlocked since it started"
        case .locked where protectionClass == .completeWhenUserInactive: "the device has been locked for longer than its inactivity period"
        case .locked, .unlocked: "the device is locked"
        }
        return .unavailable("The \(protectionClass) class key is not available: \(reason).")
    }

    /// Whether the class key is in memory and not past its deadline.
    func hasClassKey(for protectionClass: ProtectionClass) -> Bool {
        (try? withClassKey(for: protectionClass) { _ in true }) == true
    }

    /// How the passcode is stretched (benchmarks time Argon2id alone with these parameters).
    package var passcodeParameters: PasscodeParameters { core.withLock { $0.keybag.passcode } }

    /// The class B public key: always available.
    package var classBPublicKey: Data { core.withLock { $0.keybag.classBPublicKey } }

    /// Runs `body` with the store's metadata (file-name) key, available from boot.
    package func withMetadataKey<R>(_ body: (SecureBytes) throws(DataProtectionError) -> R) throws(DataProtectionError) -> R {
        try core.withLock { core throws(DataProtectionError) -> R in
            guard let key = core.keys.key(.metadata) else {
                throw core.needsReboot ?? .integrity("The metadata key is not in memory.")
            }
            return try body(key)
        }
    }

    /// Runs `body` with keys derived from the metadata key (keyed BLAKE2b, one per label),
    /// derived once and kept until the metadata key goes (reboot, erase).
    package func withMetadataKeys<R>(
        derivedFor labels: [String], _ body: ([SecureBytes]) throws(DataProtectionError) -> R
    ) throws(DataProtectionError) -> R {
        try core.withLock { core throws(DataProtectionError) -> R in
            var derived: [SecureBytes] = []
            for label in labels {
                guard let key = core.keys.derivedKey(.metadata, label: label, { BLAKE2b.deriveKey(key: $0, [.label(label)]) }) else {
                    throw core.needsReboot ?? .integrity("The metadata key is not in memory.")
                }
                derived.append(key)
            }
            return try body(derived)
        }
    }

    /// Gives up the ownership of the device directory as the process's exit would,
    /// leaving this object usable (tests only: a "process restart" in one process
    /// opens a second `Device` on the directory).
    package func relinquishOwnership() {
        ownership.release()
    }

    /// A fingerprint of a slot's key in memory (tests only: shows keys survive rewraps).
    package func keyFingerprint(_ slot: KeybagSlot) -> Data? {
        core.withLock { core in core.keys.key(slot).map { BLAKE2b.hash([.secret($0)]) } }
    }

    // MARK: - Restart and erase

    /// Restarts cleanly: open handles are flushed and closed, every class key
    /// leaves memory, and the device boots again (state ``DeviceState/booted``). Posts nothing.
    public func reboot() throws(DataProtectionError) {
        try restart(flushing: true)
    }

    /// Restarts as after a power cut: handles are closed without flushing. Posts nothing.
    public func crash() throws(DataProtectionError) {
        try restart(flushing: false)
    }

    private func restart(flushing: Bool) throws(DataProtectionError) {
        transition.lock()
        defer { transition.unlock() }
        for observer in lifecycleObservers() {
            observer.deviceWillRestart(flushing: flushing)
        }
        try replaceCore { () throws(DataProtectionError) -> Core in
            try Self.boot(files: files, hierarchy: hierarchy, now: clock.now, logger: logger)
        }
        logger.debug("device restarted", metadata: ["flushed": "\(flushing)"])
    }

    /// Erases the device: first overwrites the effaceable key in place, so the
    /// keybag and every file become unrecoverable at once; then the store on this
    /// device removes every file and directory; then the device starts afresh (no
    /// passcode, ``DeviceState/booted``, attempt count 0, an empty store). Posts nothing.
    ///
    /// An erase cut short (a crash, a power cut) is finished when the device next
    /// boots, and its store's files are removed when the store next opens.
    public func erase() throws(DataProtectionError) {
        transition.lock()
        defer { transition.unlock() }
        try eraseLocked()
    }

    func eraseLocked() throws(DataProtectionError) {
        // The intent first, durably: from here on an interrupted erase is finished at boot.
        try files.writeErasing(.effacing)
        try files.effaceAll()
        for observer in lifecycleObservers() {
            observer.deviceWillErase()
        }
        try replaceCore { () throws(DataProtectionError) -> Core in
            try Self.createFresh(files: files, hierarchy: hierarchy, passcode: nil)
        }
        logger.debug("device erased")
        let observers = lifecycleObservers()
        for observer in observers {
            observer.deviceDidErase()
        }
        // Without a store to clear, the mark stays so that the next store opened on this
        // device removes its files from before the erase.
        try files.writeErasing(observers.isEmpty ? .removingData : nil)
    }

    /// Whether this device was erased and the store's files from before are still to be removed.
    package var hasDataToErase: Bool {
        (try? files.readErasing()) == .removingData
    }

    /// The store has removed its files from before the erase.
    package func dataErased() throws(DataProtectionError) {
        try files.writeErasing(nil)
    }

    /// Wipes the current core's keys and installs a new one.
    private func replaceCore(_ make: () throws(DataProtectionError) -> Core) throws(DataProtectionError) {
        core.withLock { core in
            core.wakes.forEach { $0.cancel() }
            core.wakes.removeAll()
            core.deadlines.removeAll()
            core.keys.discardAll()
            core.state = .booted
        }
        do {
            let fresh = try make()
            core.withLock { $0 = fresh }
        } catch {
            core.withLock { $0.needsReboot = error }
            throw error
        }
    }
}

import DataProtection
import Foundation
import SodiumBridge

/// Keychain items in a `ProtectedStore`: small secrets with a label, string attributes and
/// an ``ItemAccessibility``, protected like files of the matching class
/// (`semantics.md`, "Items (keychain)"; `Keys/items.md`; `Docs/Items.md`).
///
/// ```swift
/// let keychain = store.keychain
/// try keychain.setSecret(ItemSecret("s3cret"), service: "mail.example.com", account: "ann")
/// let secret = try keychain.secret(service: "mail.example.com", account: "ann")
/// ```
///
/// Items live in three protected SQLite databases, one per protection domain (the
/// `whenUnlocked` items, the `afterFirstUnlock` items, the passcode-bound items), in the
/// store's reserved directory, which the store's file operations refuse. Every change is one
/// SQLite transaction, durable on return. An item whose class key is not in memory is not
/// returned: asked for directly, `protectedDataUnavailable`; in a search, its accessibility is
/// reported as locked (``ItemSearch/lockedAccessibilities``). No match is `fileNotFound`.
///
/// One keychain per store (`store.keychain`), used from any thread (calls are serialized).
public final class Keychain: Sendable {
    /// The attribute ``ProtectedKeychain/setSecret(_:service:account:label:accessibility:)`` names the service with.
    public static let serviceAttribute = "service"
    /// The attribute ``ProtectedKeychain/setSecret(_:service:account:label:accessibility:)`` names the account with.
    public static let accountAttribute = "account"

    /// The store the items live in.
    public let store: ProtectedStore

    struct State: ~Copyable {
        var databases: [ItemDomain: ItemDatabase] = [:]
        /// Whether each domain's database exists, as last seen (looking costs a walk of the
        /// store's encrypted names; only this keychain makes them, and a device event that
        /// removes them makes the domain stale).
        var exists: [ItemDomain: Bool] = [:]
        var generation: UInt64 = 0
        var streams: [UInt64: AsyncStream<UInt64>.Continuation] = [:]
        var nextStream: UInt64 = 0
        var checkedDiscards = false
        /// Per open domain: the moves to another domain begun and not finished (read when the
        /// database opens; empty almost always).
        var pendingMoves: [ItemDomain: [(id: String, target: ItemDomain)]] = [:]
    }

    /// Reached only under `serial` (here and in the extensions of other files).
    nonisolated(unsafe) var state = State()
    private let serial = NSLock()
    /// The domains whose connections a device event made stale (reboot, erase, passcode
    /// removal), closed by the next call. Set by the device's observer without `serial`, which
    /// an operation may hold while it waits for the device.
    let stale = Locked<Set<ItemDomain>>([])
    /// The domains whose connections a key discard could not close at once (see
    /// ``keysWillBeDiscarded(_:)``), closed by the next call.
    private let closeOwed = Locked<Set<ItemDomain>>([])
    private let watch: Locked<KeychainDeviceWatch?> = Locked(nil)

    init(store: ProtectedStore) {
        self.store = store
        let watch = KeychainDeviceWatch(keychain: self)
        self.watch.withLock { $0 = watch }
        store.device.addLifecycleObserver(watch, first: true)
    }

    deinit {
        for database in state.databases.values { database.close() }
    }

    // MARK: - Change tracking

    /// A number that grows with every change this keychain makes (add, update, delete,
    /// restore, and the removal of passcode-bound items): compare it with an earlier value to
    /// know cheaply whether anything changed. Starts at 0 in each process.
    public var generation: UInt64 {
        serial.withLock { state.generation }
    }

    /// The generations reached from now on, one per change (see ``generation``).
    public func changes() -> AsyncStream<UInt64> {
        let (stream, continuation) = AsyncStream<UInt64>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let id = serial.withLock { () -> UInt64 in
            defer { state.nextStream += 1 }
            state.streams[state.nextStream] = continuation
            return state.nextStream
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = serial.withLock { state.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Under `serial`: one change more.
    func changed() {
        state.generation += 1
        for stream in state.streams.values { stream.yield(state.generation) }
    }

    // MARK: - Adding

    /// Adds an item.
    ///
    /// - Parameters:
    ///   - secret: the secret.
    ///   - label: a name for people.
    ///   - attributes: the attributes; the whole set is the item's identity in its protection
    ///     domain (`Keys/items.md` §4).
    ///   - accessibility: when the secret can be read.
    ///   - replacing: replace an item of the same domain with the same attribute set (its
    ///     identifier and creation date are kept), as Secret Service's `CreateItem` does.
    /// - Returns: the item added (or replaced).
    /// - Throws: `fileExists` (an item of the domain has the same attribute set, and not
    ///   `replacing`), `protectedDataUnavailable` (the class key is not in memory, or
    ///   ``ItemAccessibility/whenPasscodeSetThisDeviceOnly`` without a passcode),
    ///   `invalidArgument` (an empty attribute name, a NUL byte).
    @discardableResult
    public func add(
        _ secret: ItemSecret, label: String, attributes: [String: String], accessibility: ItemAccessibility = .whenUnlocked,
        replacing: Bool = false
    ) throws(DataProtectionError) -> KeychainItem {
        try ItemIdentity.validate(label: label, attributes: attributes)
        return try serialized { () throws(DataProtectionError) -> KeychainItem in
            let domain = accessibility.domain
            let database = try writableDatabase(domain)
            let now = ItemDatabase.now()
            let identity = ItemIdentity.encode(attributes)
            let result = try database.transaction { () throws(DataProtectionError) -> KeychainItem in
                if let existing = try database.item(identity: identity) {
                    guard replacing else {
                        throw DataProtectionError(.fileExists, "An item with the same attributes exists (\(existing.id)).",
                                                  hint: "Update it, delete it first, or add with replace.")
                    }
                    var replaced = existing
                    replaced.label = label
                    replaced.accessibility = accessibility
                    replaced.modificationDate = now
                    try database.replace(replaced, secret: secret)
                    return replaced
                }
                let item = KeychainItem(id: Self.newIdentifier(), label: label, attributes: attributes, accessibility: accessibility,
                                        creationDate: now, modificationDate: now)
                try database.insert(item, secret: secret)
                return item
            }
            changed()
            return result
        }
    }

    /// A new item identifier: 128 random bits as 32 lowercase hexadecimal digits.
    static func newIdentifier() -> String {
        let random = SecureBytes.random(count: 16)
        return random.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
    }

    // MARK: - Finding

    /// The items whose attributes include every one of `attributes` (all items for `[:]`), in
    /// the accessibilities given (all by default), without their secrets. Never throws for
    /// no match or a locked class: see ``ItemSearch``.
    public func items(
        matching attributes: [String: String], accessibilities: Set<ItemAccessibility> = Set(ItemAccessibility.allCases)
    ) throws(DataProtectionError) -> ItemSearch {
        try ItemIdentity.validate(label: nil, attributes: attributes)
        return try serialized { () throws(DataProtectionError) -> ItemSearch in
            var search = ItemSearch(items: [], lockedAccessibilities: [])
            for domain in ItemDomain.allCases {
                let wanted = Set(domain.accessibilities).intersection(accessibilities)
                guard !wanted.isEmpty else { continue }
                switch try readableDatabase(domain) {
                case .empty: continue
                case .locked: search.lockedAccessibilities.formUnion(wanted)
                case .open(let database):
                    search.items += try database.items(matching: attributes).filter { wanted.contains($0.accessibility) }
                }
            }
            return search
        }
    }

    /// The item `id`.
    ///
    /// - Throws: `fileNotFound`, or `protectedDataUnavailable` when it may be among the items
    ///   that cannot be read now.
    public func item(withID id: String) throws(DataProtectionError) -> KeychainItem {
        try serialized { () throws(DataProtectionError) -> KeychainItem in try locate(id).item }
    }

    /// The secret of item `id`.
    ///
    /// - Throws: as ``item(withID:)``.
    public func secret(ofItemWithID id: String) throws(DataProtectionError) -> ItemSecret {
        try serialized { () throws(DataProtectionError) -> ItemSecret in
            let (database, _) = try locate(id)
            guard let secret = try database.secret(id: id) else {
                throw DataProtectionError(.fileNotFound, "No item \(id).")
            }
            return secret
        }
    }

    // MARK: - Updating

    /// Changes the label, the attributes (the whole set) or the secret of item `id`.
    ///
    /// - Returns: the item as it now is.
    /// - Throws: as ``item(withID:)``; `fileExists` when the new attribute set is another
    ///   item's of the same domain.
    @discardableResult
    public func updateItem(
        withID id: String, label: String? = nil, attributes: [String: String]? = nil, secret: ItemSecret? = nil
    ) throws(DataProtectionError) -> KeychainItem {
        try updateItem(withID: id, label: label, attributes: attributes, secret: secret, accessibility: nil)
    }

    /// Changes the label, the attributes (the whole set), the secret or the accessibility of
    /// item `id`. The item keeps its identifier and creation date. A new accessibility of
    /// another protection domain moves the item to that domain's database, crash-safely: a
    /// crash during the move leaves the item in one domain, the old or the new, never in
    /// neither, and never visible twice (`Keys/items.md` §9).
    ///
    /// - Returns: the item as it now is.
    /// - Throws: as ``item(withID:)``; `fileExists` when the new attribute set is another
    ///   item's of the target domain; `protectedDataUnavailable` when the target domain is
    ///   locked (or needs a passcode the device has not).
    @discardableResult
    public func updateItem(
        withID id: String, label: String? = nil, attributes: [String: String]? = nil, secret: ItemSecret? = nil,
        accessibility: ItemAccessibility?
    ) throws(DataProtectionError) -> KeychainItem {
        try ItemIdentity.validate(label: label, attributes: attributes)
        return try serialized { () throws(DataProtectionError) -> KeychainItem in
            let (database, item) = try locate(id)
            let updated: KeychainItem
            if let accessibility, accessibility.domain != database.domain {
                updated = try move(item, from: database, to: accessibility, label: label, attributes: attributes, secret: secret)
            } else {
                updated = try update(item, in: database, label: label, attributes: attributes, secret: secret, accessibility: accessibility)
            }
            changed()
            return updated
        }
    }

    /// Changes every readable item whose attributes include every one of `attributes`
    /// (Apple's `SecItemUpdate`): its label, attributes or secret, where given.
    ///
    /// - Returns: the items as they now are.
    /// - Throws: as ``item(matching:)``; `fileExists` when a new attribute set is another
    ///   item's of the same domain (nothing is changed then).
    @discardableResult
    public func update(
        matching attributes: [String: String], label: String? = nil, attributes newAttributes: [String: String]? = nil,
        secret: ItemSecret? = nil
    ) throws(DataProtectionError) -> [KeychainItem] {
        try ItemIdentity.validate(label: label, attributes: newAttributes)
        let search = try items(matching: attributes)
        guard !search.items.isEmpty else { throw Self.noMatch(search, "No item matches \(Self.describe(attributes)).") }
        return try serialized { () throws(DataProtectionError) -> [KeychainItem] in
            var updated: [KeychainItem] = []
            for domain in ItemDomain.allCases {
                let matches = search.items.filter { $0.accessibility.domain == domain }
                guard !matches.isEmpty, case .open(let database) = try readableDatabase(domain) else { continue }
                try database.transaction { () throws(DataProtectionError) in
                    for match in matches {
                        guard let current = try database.item(id: match.id) else { continue }
                        updated.append(try update(current, in: database, label: label, attributes: newAttributes, secret: secret, inTransaction: true))
                    }
                }
            }
            if !updated.isEmpty { changed() }
            return updated
        }
    }

    private func update(
        _ item: KeychainItem, in database: ItemDatabase, label: String?, attributes: [String: String]?, secret: ItemSecret?,
        accessibility: ItemAccessibility? = nil, inTransaction: Bool = false
    ) throws(DataProtectionError) -> KeychainItem {
        var updated = item
        if let accessibility { updated.accessibility = accessibility }
        if let label { updated.label = label }
        if let attributes { updated.attributes = attributes }
        updated.modificationDate = ItemDatabase.now()
        let work = { () throws(DataProtectionError) in
            if attributes != nil, let other = try database.item(identity: ItemIdentity.encode(updated.attributes)), other.id != item.id {
                throw DataProtectionError(.fileExists, "Another item (\(other.id)) has the attributes \(Self.describe(updated.attributes)).")
            }
            try database.replace(updated, secret: secret)
        }
        if inTransaction { try work() } else { try database.transaction(work) }
        return updated
    }

    // MARK: - Deleting

    /// Deletes item `id`.
    ///
    /// - Throws: as ``item(withID:)``.
    public func deleteItem(withID id: String) throws(DataProtectionError) {
        try serialized { () throws(DataProtectionError) in
            let (database, _) = try locate(id)
            try database.transaction { () throws(DataProtectionError) in try database.delete(id: id) }
            changed()
        }
    }

    /// Deletes every readable item whose attributes include every one of `attributes`.
    ///
    /// - Returns: how many were deleted.
    /// - Throws: as ``item(matching:)``.
    @discardableResult
    public func delete(matching attributes: [String: String]) throws(DataProtectionError) -> Int {
        let search = try items(matching: attributes)
        guard !search.items.isEmpty else { throw Self.noMatch(search, "No item matches \(Self.describe(attributes)).") }
        return try serialized { () throws(DataProtectionError) -> Int in
            var count = 0
            for domain in ItemDomain.allCases {
                let matches = search.items.filter { $0.accessibility.domain == domain }
                guard !matches.isEmpty, case .open(let database) = try readableDatabase(domain) else { continue }
                try database.transaction { () throws(DataProtectionError) in
                    for match in matches { try database.delete(id: match.id) }
                }
                count += matches.count
            }
            if count > 0 { changed() }
            return count
        }
    }

    // MARK: - Databases

    enum Readable {
        case empty
        case locked
        case open(ItemDatabase)
    }

    /// Runs `body` under the keychain's lock, after closing what a device event made stale
    /// and, once per process, removing passcode-bound items a passcode removal left.
    func serialized<R>(_ body: () throws(DataProtectionError) -> R) throws(DataProtectionError) -> R {
        serial.lock()
        defer { serial.unlock() }
        let staleDomains = stale.withLock { domains in defer { domains.removeAll() }; return domains }
        for domain in staleDomains {
            state.databases.removeValue(forKey: domain)?.close()
            state.exists.removeValue(forKey: domain)
            state.pendingMoves.removeValue(forKey: domain)
        }
        if staleDomains.contains(.passcodeBound) { changed() }
        for domain in closeOwed.withLock({ domains in defer { domains.removeAll() }; return domains }) {
            state.databases.removeValue(forKey: domain)?.close()
        }
        if !state.checkedDiscards {
            // A passcode removed by a process without the store, or a discard cut by a crash.
            if !store.device.hasPasscode { try store.discardPasscodeBoundItems() } else { try store.removeDiscardedItemAreas() }
            state.checkedDiscards = true
        }
        try resolvePendingMoves()
        return try body()
    }

    /// Under `serial`: the domain's database, open, or why not.
    func readableDatabase(_ domain: ItemDomain) throws(DataProtectionError) -> Readable {
        if domain == .passcodeBound, !store.device.hasPasscode { return .empty }
        if let open = state.databases[domain] {
            guard store.device.isAvailable(domain.protectionClass) else { return .locked }
            return .open(open)
        }
        let exists = state.exists[domain] ?? ReservedStoreArea.withAccess { store.fileExists(atPath: domain.databasePath) }
        state.exists[domain] = exists
        guard exists else { return .empty }
        guard store.device.isAvailable(domain.protectionClass) else { return .locked }
        let database = try ItemDatabase(domain: domain, store: store, create: false)
        state.databases[domain] = database
        return .open(database)
    }

    /// Under `serial`: the domain's database, created if missing.
    func writableDatabase(_ domain: ItemDomain) throws(DataProtectionError) -> ItemDatabase {
        if domain == .passcodeBound, !store.device.hasPasscode {
            throw DataProtectionError(.protectedDataUnavailable, "whenPasscodeSetThisDeviceOnly items need a passcode, and the device has none.",
                                      hint: "Set a passcode first (`dpctl passcode set`).")
        }
        guard store.device.isAvailable(domain.protectionClass) else {
            throw DataProtectionError(.protectedDataUnavailable, "The \(domain.rawValue) items are locked (their class is \(domain.protectionClass.rawValue)).",
                                      hint: "Unlock the device, then try again.")
        }
        if let open = state.databases[domain] { return open }
        state.exists[domain] = nil
        let database = try ItemDatabase(domain: domain, store: store, create: true)
        state.databases[domain] = database
        state.exists[domain] = true
        return database
    }

    /// Under `serial`: where item `id` lives.
    private func locate(_ id: String) throws(DataProtectionError) -> (database: ItemDatabase, item: KeychainItem) {
        var locked = false
        for domain in ItemDomain.allCases {
            switch try readableDatabase(domain) {
            case .empty: continue
            case .locked: locked = true
            case .open(let database):
                if let item = try database.item(id: id) { return (database, item) }
            }
        }
        throw locked
            ? DataProtectionError(.protectedDataUnavailable, "No readable item \(id); some items are locked.", hint: "Unlock the device, then try again.")
            : DataProtectionError(.fileNotFound, "No item \(id).")
    }

    package static func noMatch(_ search: ItemSearch, _ message: String) -> DataProtectionError {
        guard search.isComplete else {
            let locked = search.lockedAccessibilities.map(\.rawValue).sorted().joined(separator: ", ")
            return DataProtectionError(.protectedDataUnavailable, message + " Items that are \(locked) are locked.",
                                       hint: "Unlock the device, then try again.")
        }
        return DataProtectionError(.fileNotFound, message)
    }

    package static func describe(_ attributes: [String: String]) -> String {
        attributes.isEmpty ? "(any)" : attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }

    /// The keys of `classes` are about to go (still present): the connections to the domains
    /// of those classes close now. Dropping SQLite's page cache (which the database does at the
    /// discard) is not enough for items: a connection keeps the last record it wrote, with its
    /// secret, in a scratch buffer of its B-tree layer (one page, reused for every record
    /// inserted, freed only when the connection closes), which would outlive the lock. The
    /// connection reopens at the next call that may read the domain. Called by the device's
    /// observer, which may hold the device's lock that a keychain call holding `serial` is
    /// waiting for: after a bounded wait the close is left to that next call.
    func keysWillBeDiscarded(_ classes: Set<ProtectionClass>) {
        let domains = ItemDomain.allCases.filter { classes.contains($0.protectionClass) }
        guard !domains.isEmpty else { return }
        guard serial.lock(before: Date(timeIntervalSinceNow: 2)) else {
            closeOwed.withLock { $0.formUnion(domains) }
            return
        }
        defer { serial.unlock() }
        for domain in domains { state.databases.removeValue(forKey: domain)?.close() }
    }

    /// Under `serial` (for restore): records a change.
    func recordChange() { changed() }
}

/// Tells the keychain which of its connections a device event made stale, without taking its
/// lock (the device calls it while it holds its own, which a keychain call may be waiting for).
/// Registered before the store's observer: at a passcode removal, the connection to the
/// passcode-bound items is marked before the store renames their directory away.
final class KeychainDeviceWatch: DeviceLifecycleObserver, Sendable {
    private weak let keychain: Keychain?

    init(keychain: Keychain) {
        self.keychain = keychain
    }

    func deviceWillDiscardKeys(of classes: Set<ProtectionClass>) {
        keychain?.keysWillBeDiscarded(classes)
    }

    func deviceWillRestart(flushing: Bool) {
        keychain?.stale.withLock { $0.formUnion(ItemDomain.allCases) }
    }

    func deviceWillErase() {
        keychain?.stale.withLock { $0.formUnion(ItemDomain.allCases) }
    }

    func deviceWillRemovePasscode() {
        keychain?.stale.withLock { _ = $0.insert(.passcodeBound) }
    }
}

extension ProtectedStore {
    /// The store's keychain: one per store in a process while anything holds it (keep it for as
    /// long as you use it: its ``Keychain/generation`` and ``Keychain/changes()`` are its own).
    public var keychain: Keychain { KeychainRegistry.keychain(for: self) }
}

/// The live keychain of each store (held weakly: a keychain holds its store).
enum KeychainRegistry {
    private struct Registration {
        weak var keychain: Keychain?
    }

    private static let registrations = Locked<[ObjectIdentifier: Registration]>([:])

    static func keychain(for store: ProtectedStore) -> Keychain {
        registrations.withLock { registrations in
            registrations = registrations.filter { $0.value.keychain != nil }
            if let existing = registrations[ObjectIdentifier(store)]?.keychain, existing.store === store { return existing }
            let keychain = Keychain(store: store)
            registrations[ObjectIdentifier(store)] = Registration(keychain: keychain)
            return keychain
        }
    }
}

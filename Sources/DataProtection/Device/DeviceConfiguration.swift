import SodiumBridge

/// The tunable rules of a ``Device``.
public struct DeviceConfiguration: Sendable, Hashable {
    /// How long class A and class B (secret) keys stay after `lock` (default 0 s;
    /// Apple uses 10 s when "Require Passcode" is "Immediately").
    public var gracePeriod: Duration
    /// How long the device must stay locked before the class CX key is discarded (default 48 h).
    public var inactivityPeriod: Duration
    /// Erase the device when this many consecutive failed attempts is reached (`nil`, the default: never).
    public var eraseAfterFailedAttempts: Int?
    /// How expensive the passcode derivation is made when a passcode is set (default: calibrated to ~90 ms).
    public var passcodeCost: PasscodeCost
    /// How long opening a device waits while another process (or another `Device`
    /// of this process) owns its directory, before failing with
    /// ``DataProtectionError/Code/storeBusy`` (default 30 s; `.zero`: do not wait).
    public var ownershipTimeout: Duration

    /// The default rules, optionally changed.
    public init(
        gracePeriod: Duration = .zero,
        inactivityPeriod: Duration = .seconds(48 * 3600),
        eraseAfterFailedAttempts: Int? = nil,
        passcodeCost: PasscodeCost = .standard,
        ownershipTimeout: Duration = .seconds(30)
    ) {
        self.gracePeriod = gracePeriod
        self.inactivityPeriod = inactivityPeriod
        self.eraseAfterFailedAttempts = eraseAfterFailedAttempts
        self.passcodeCost = passcodeCost
        self.ownershipTimeout = ownershipTimeout
    }

    func validate() throws(DataProtectionError) {
        guard gracePeriod >= .zero else { throw .invalidArgument("The grace period cannot be negative.") }
        guard inactivityPeriod >= .zero else { throw .invalidArgument("The inactivity period cannot be negative.") }
        guard ownershipTimeout >= .zero else { throw .invalidArgument("The ownership timeout cannot be negative.") }
        if let limit = eraseAfterFailedAttempts, limit < 1 {
            throw .invalidArgument("Erase after \(limit) failed attempts: the limit must be at least 1.")
        }
        if case .fixed(let operations, let memory) = passcodeCost {
            guard operations >= Argon2id.minimumOperations, operations <= Argon2id.maximumOperations,
                  memory >= Argon2id.minimumMemory, memory <= PasscodeParameters.maximumMemory else {
                throw .invalidArgument(
                    "Argon2id needs \(Argon2id.minimumOperations) to \(Argon2id.maximumOperations) passes and between 8 KiB and 4 GiB of memory.")
            }
        }
    }
}

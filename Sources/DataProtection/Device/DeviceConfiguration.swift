import Logging
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
    /// Where the device and its store log, through swift-log (default: a logger labelled
    /// `DataProtection.Device`, routed by whatever `LoggingSystem` the program bootstrapped).
    ///
    /// What is logged, never a key, a passcode or file content: `error` when a file could
    /// not be flushed before its class key was discarded, at a restart, or when the store
    /// could not be prepared after an erase; `warning` when the attempt counter is missing
    /// or forged (the longest delay applies); `notice` when boot completes an interrupted
    /// erase or key rotation, or migrates an old store layout; `debug` for every lock,
    /// unlock, key discard, restart, erase, passcode change and failed attempt. Not part of
    /// equality: two configurations with different loggers are the same rules.
    public var logger: Logger
    /// What holds the device key (default `nil`: a random key in the device directory's
    /// `uid` file, created with the device). A TPM, HSM or kernel-keyring provider keeps the
    /// key out of every file; the device directory then holds no `uid` file. A device opens
    /// only with the provider (and key) it was created with: anything else is
    /// `integrityFailure`. Not part of equality, like the logger.
    public var deviceKeyProvider: (any DeviceKeyProvider)?
    /// What holds the device key of a device created with this configuration (default
    /// ``DeviceKeyKind/file``). An existing device keeps what it was created with (its
    /// device directory records it); ignored when ``deviceKeyProvider`` is set.
    public var deviceKeyKind: DeviceKeyKind
    /// The TPM of a ``DeviceKeyKind/tpm`` device, in tpm2-tss TCTI syntax (default
    /// `device:/dev/tpmrm0`, the kernel's resource manager; `swtpm:host=127.0.0.1,port=2321`
    /// for a software TPM). `dpctl` takes it from `DPCTL_TPM_TCTI`.
    public var tpmTCTI: String

    /// The TCTI of the kernel's TPM resource manager.
    public static let defaultTPMTCTI = "device:/dev/tpmrm0"

    /// The default rules, optionally changed.
    public init(
        gracePeriod: Duration = .zero,
        inactivityPeriod: Duration = .seconds(48 * 3600),
        eraseAfterFailedAttempts: Int? = nil,
        passcodeCost: PasscodeCost = .standard,
        ownershipTimeout: Duration = .seconds(30),
        logger: Logger = Logger(label: "DataProtection.Device"),
        deviceKeyProvider: (any DeviceKeyProvider)? = nil,
        deviceKeyKind: DeviceKeyKind = .file,
        tpmTCTI: String = DeviceConfiguration.defaultTPMTCTI
    ) {
        self.gracePeriod = gracePeriod
        self.inactivityPeriod = inactivityPeriod
        self.eraseAfterFailedAttempts = eraseAfterFailedAttempts
        self.passcodeCost = passcodeCost
        self.ownershipTimeout = ownershipTimeout
        self.logger = logger
        self.deviceKeyProvider = deviceKeyProvider
        self.deviceKeyKind = deviceKeyKind
        self.tpmTCTI = tpmTCTI
    }

    /// The same rules (the logger and the device key provider are not compared).
    public static func == (lhs: DeviceConfiguration, rhs: DeviceConfiguration) -> Bool {
        lhs.gracePeriod == rhs.gracePeriod && lhs.inactivityPeriod == rhs.inactivityPeriod
            && lhs.eraseAfterFailedAttempts == rhs.eraseAfterFailedAttempts && lhs.passcodeCost == rhs.passcodeCost
            && lhs.ownershipTimeout == rhs.ownershipTimeout && lhs.deviceKeyKind == rhs.deviceKeyKind
            && lhs.tpmTCTI == rhs.tpmTCTI
    }

    /// Hashes the rules (not the logger, nor the device key provider).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(gracePeriod)
        hasher.combine(inactivityPeriod)
        hasher.combine(eraseAfterFailedAttempts)
        hasher.combine(passcodeCost)
        hasher.combine(ownershipTimeout)
        hasher.combine(deviceKeyKind)
        hasher.combine(tpmTCTI)
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

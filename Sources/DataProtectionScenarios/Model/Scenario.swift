import DataProtection

/// One scenario: a fresh device set up by ``setup``, then ``steps`` in order.
public struct Scenario: Sendable, Hashable {
    /// The title given after `scenario`.
    public var title: String
    /// Where the scenario starts (its `scenario` line, or the ``Timeline`` call).
    public var location: ScenarioLocation
    /// The `device` statement.
    public var setup: DeviceSetup
    /// The statements after `device`, in order.
    public var steps: [Step]

    /// A scenario with its title, where it starts, its device and its steps.
    public init(title: String, location: ScenarioLocation, setup: DeviceSetup = DeviceSetup(), steps: [Step] = []) {
        self.title = title
        self.location = location
        self.setup = setup
        self.steps = steps
    }
}

/// The `device` statement: how the fresh device is configured.
public struct DeviceSetup: Sendable, Hashable {
    /// `passcode=<p>`: the device starts booted with this passcode set.
    public var passcode: String?
    /// `grace=<duration>` (default 0 s).
    public var gracePeriod: Duration
    /// `erase-after=<n>` (default: never).
    public var eraseAfterFailedAttempts: Int?
    /// `inactivity=<duration>` (default 48 h).
    public var inactivityPeriod: Duration
    /// Where the `device` statement is.
    public var location: ScenarioLocation?

    /// A `device` statement's options (the defaults: no passcode, grace 0, no erase limit, 48 h).
    public init(
        passcode: String? = nil, gracePeriod: Duration = .zero, eraseAfterFailedAttempts: Int? = nil,
        inactivityPeriod: Duration = DeviceConfiguration().inactivityPeriod, location: ScenarioLocation? = nil
    ) {
        self.passcode = passcode
        self.gracePeriod = gracePeriod
        self.eraseAfterFailedAttempts = eraseAfterFailedAttempts
        self.inactivityPeriod = inactivityPeriod
        self.location = location
    }

    /// The device configuration, with the cheapest passcode derivation (scenarios test rules, not Argon2id).
    public var configuration: DeviceConfiguration {
        DeviceConfiguration(gracePeriod: gracePeriod, inactivityPeriod: inactivityPeriod,
                            eraseAfterFailedAttempts: eraseAfterFailedAttempts, passcodeCost: .minimal)
    }
}

/// One statement after `device`, with what it must produce.
public struct Step: Sendable, Hashable {
    /// What to do.
    public var action: Action
    /// What must come of it.
    public var expectation: StepExpectation
    /// Where the statement is.
    public var location: ScenarioLocation
    /// The statement as written (the source line without its comment), for reports.
    public var source: String

    /// A step: its action, what it should give, and where it was written.
    public init(_ action: Action, expectation: StepExpectation = .success, location: ScenarioLocation, source: String? = nil) {
        self.action = action
        self.expectation = expectation
        self.location = location
        self.source = source ?? action.description
    }
}

package loop

// ProcessMark and MachineID expose the lease owner's process mark to the
// tests that forge the leases of other processes.
var (
	ProcessMark = processMark
	MachineID   = machineID
)

package loop

// ProcessMark and MachineID expose the lease owner's process mark to the
// tests that forge the leases of other processes.
var (
	ProcessMark = processMark
	MachineID   = machineID
)

// HideProcesses makes the lease code read process entries from an empty
// directory until the test ends, as on a machine whose /proc is mounted
// with hidepid=2: other users' processes are not shown there.
func HideProcesses(dir string) (restore func()) {
	old := procDir
	procDir = dir
	return func() { procDir = old }
}

package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes the host a comparison ran on.
type Machine struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	MemoryGiB int    `json:"memory_gib,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	Go        string `json:"go"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute load when the run
	// began: on a shared machine it says how much else was running.
	LoadAvg string `json:"load_avg,omitempty"`
}

// DescribeMachine reads what it can about this host; fields it cannot
// read are left empty.
func DescribeMachine() Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if v, ok := procField("/proc/cpuinfo", "model name"); ok {
		m.CPUModel = v
	}
	if v, ok := procField("/proc/meminfo", "MemTotal"); ok {
		if kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64); err == nil {
			m.MemoryGiB = int((kb + 1<<19) >> 20)
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}

func (m Machine) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s, %d CPUs", m.OS, m.Arch, m.CPUs)
	if m.CPUModel != "" {
		fmt.Fprintf(&b, " (%s)", m.CPUModel)
	}
	if m.MemoryGiB > 0 {
		fmt.Fprintf(&b, ", %d GiB RAM", m.MemoryGiB)
	}
	if m.Kernel != "" {
		fmt.Fprintf(&b, ", kernel %s", m.Kernel)
	}
	fmt.Fprintf(&b, ", %s", m.Go)
	if m.LoadAvg != "" {
		fmt.Fprintf(&b, ", load average %s at start", m.LoadAvg)
	}
	return b.String()
}

// procField returns the first "key: value" line's value for key.
func procField(path, key string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

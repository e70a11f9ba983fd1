package server

import "testing"

func TestControllerSelection(t *testing.T) {
	for _, tc := range []struct {
		sel     ControllerSelection
		name    string
		want    bool
		invalid bool
	}{
		{sel: nil, name: "job-controller", want: true},
		{sel: ControllerSelection{"*"}, name: "statefulset-controller", want: true},
		{sel: ControllerSelection{"*", "-job"}, name: "job-controller", want: false},
		{sel: ControllerSelection{"*", "-job-controller"}, name: "job-controller", want: false},
		{sel: ControllerSelection{"*", "-job"}, name: "deployment-controller", want: true},
		{sel: ControllerSelection{"job"}, name: "job-controller", want: true},
		{sel: ControllerSelection{"job"}, name: "deployment-controller", want: false},
		// The first entry naming a controller wins, as in kube-controller-manager.
		{sel: ControllerSelection{"-job", "job"}, name: "job-controller", want: false},
		{sel: ControllerSelection{"*", "-jobs"}, invalid: true},
	} {
		if err := tc.sel.Validate(); (err != nil) != tc.invalid {
			t.Errorf("%v: Validate() = %v, want invalid %v", tc.sel, err, tc.invalid)
		}
		if tc.invalid {
			continue
		}
		if got := tc.sel.Enabled(tc.name); got != tc.want {
			t.Errorf("%v.Enabled(%s) = %v, want %v", tc.sel, tc.name, got, tc.want)
		}
	}
}

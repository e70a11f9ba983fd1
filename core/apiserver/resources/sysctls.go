package resources

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/node/util/sysctl"
)

// sysctlSegment and sysctlName are Kubernetes' sysctl name syntax: dot- or
// slash-separated segments of lower-case letters, digits, '-' and '_', each beginning
// and ending with a letter or digit.
const (
	sysctlSegment   = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
	sysctlName      = "(" + sysctlSegment + "[\\./])*" + sysctlSegment
	sysctlMaxLength = 253
)

// sysctlRegexp matches a whole sysctl name; compiled once, it is only ever read.
var sysctlRegexp = regexp.MustCompile("^" + sysctlName + "$")

// validateSysctls checks a pod's sysctls as Kubernetes' validateSysctls does: a valid,
// unique name each, and no sysctl of a namespace the pod shares with its host (the
// network namespace under hostNetwork, the IPC namespace under hostIPC), since setting
// it would change the host's.
func validateSysctls(sc *corev1.PodSecurityContext, hostNetwork, hostIPC bool, p *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, s := range sc.Sysctls {
		np := p.Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(np, ""))
		case len(s.Name) > sysctlMaxLength || !sysctlRegexp.MatchString(s.Name):
			errs = append(errs, field.Invalid(np, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlName)))
		case seen.Has(s.Name):
			errs = append(errs, field.Duplicate(np, s.Name))
		}
		seen.Insert(s.Name)
		switch ns, _, _ := sysctl.GetNamespace(s.Name); {
		case hostNetwork && ns == sysctl.NetNamespace:
			errs = append(errs, field.Invalid(np, s.Name, "may not be specified when 'hostNetwork' is true"))
		case hostIPC && ns == sysctl.IPCNamespace:
			errs = append(errs, field.Invalid(np, s.Name, "may not be specified when 'hostIPC' is true"))
		}
	}
	return errs
}

package resources

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// defaultPodSpec applies the defaults Kubernetes' v1 defaulters give a pod spec.
func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	if spec.ServiceAccountName == "" && spec.DeprecatedServiceAccount != "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		defaultContainer((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
}

func defaultContainer(c *corev1.Container) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if imageTag(c.Image) == "latest" || (imageTag(c.Image) == "" && !strings.Contains(c.Image, "@")) {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(pr)
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
	// Requests default to limits, as in Kubernetes.
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = q.DeepCopy()
		}
	}
}

// defaultProbe gives a probe Kubernetes' v1 defaults (SetDefaults_Probe): without them
// the kubelet would probe every 0 s and fail a container at its first miss.
func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
}

func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// validateProbe checks a probe as Kubernetes does: one handler, non-negative timings,
// positive thresholds, and a success threshold of 1 where only one success can count
// (liveness and startup probes).
func validateProbe(pr *corev1.Probe, path *field.Path, oneSuccess bool) field.ErrorList {
	if pr == nil {
		return nil
	}
	var errs field.ErrorList
	handlers := 0
	for _, set := range []bool{pr.Exec != nil, pr.HTTPGet != nil, pr.TCPSocket != nil, pr.GRPC != nil} {
		if set {
			handlers++
		}
	}
	switch {
	case handlers == 0:
		errs = append(errs, field.Required(path, "must specify a handler type"))
	case handlers > 1:
		errs = append(errs, field.Forbidden(path, "may not specify more than 1 handler type"))
	}
	for _, v := range []struct {
		name string
		val  int32
	}{{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds},
		{"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold}} {
		if v.val < 0 {
			errs = append(errs, field.Invalid(path.Child(v.name), v.val, "must be greater than or equal to 0"))
		}
	}
	if oneSuccess && pr.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(path.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if h := pr.HTTPGet; h != nil && h.Scheme != corev1.URISchemeHTTP && h.Scheme != corev1.URISchemeHTTPS {
		errs = append(errs, field.NotSupported(path.Child("httpGet", "scheme"), h.Scheme, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
	}
	return errs
}

// imageTag returns the tag of an image reference ("" when it has none).
func imageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon > slash {
		return image[colon+1:]
	}
	return ""
}

var (
	restartPolicies = sets.New(corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)
	dnsPolicies     = sets.New(corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone)
	pullPolicies    = sets.New(corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)
)

// validatePodSpec checks the parts of a pod spec that the rest of the system relies on.
func validatePodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), ""))
	}
	names := sets.New[string]()
	errs = append(errs, validateContainers(spec.InitContainers, path.Child("initContainers"), names)...)
	errs = append(errs, validateContainers(spec.Containers, path.Child("containers"), names)...)
	errs = append(errs, validateEphemeralContainers(spec, path.Child("ephemeralContainers"), names)...)
	if !restartPolicies.Has(spec.RestartPolicy) {
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), spec.RestartPolicy, sets.List(restartPolicies)))
	}
	if !dnsPolicies.Has(spec.DNSPolicy) {
		errs = append(errs, field.NotSupported(path.Child("dnsPolicy"), spec.DNSPolicy, sets.List(dnsPolicies)))
	}
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *spec.ActiveDeadlineSeconds, "must be between 1 and 2147483647, inclusive"))
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	if spec.NodeName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(spec.NodeName) {
			errs = append(errs, field.Invalid(path.Child("nodeName"), spec.NodeName, msg))
		}
	}
	for k, v := range spec.NodeSelector {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(path.Child("nodeSelector").Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(path.Child("nodeSelector").Key(k), v, msg))
		}
	}
	errs = append(errs, validateTolerations(spec.Tolerations, path.Child("tolerations"))...)
	errs = append(errs, validateSysctls(spec.SecurityContext, spec.HostNetwork, spec.HostIPC, path.Child("securityContext", "sysctls"))...)
	return append(errs, validateProjectedVolumes(spec.Volumes, path.Child("volumes"))...)
}

// validateTolerations checks tolerations as pods' validation does; RuntimeClasses'
// scheduling tolerations follow the same rules.
func validateTolerations(tolerations []corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		tp := path.Index(i)
		if t.Operator == corev1.TolerationOpExists && t.Value != "" {
			errs = append(errs, field.Invalid(tp.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
		}
		if t.Operator != "" && t.Operator != corev1.TolerationOpExists && t.Operator != corev1.TolerationOpEqual {
			errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator, []string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(tp.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
	}
	return errs
}

func validateContainers(cs []corev1.Container, path *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for i := range cs {
		errs = append(errs, validateContainer(&cs[i], path.Index(i), names)...)
	}
	return errs
}

// validateContainer checks one container at p; names holds the names seen so far.
func validateContainer(c *corev1.Container, p *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
		}
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		names.Insert(c.Name)
	}
	if strings.TrimSpace(c.Image) == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	} else if c.Image != strings.TrimSpace(c.Image) {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	if !pullPolicies.Has(c.ImagePullPolicy) {
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, sets.List(pullPolicies)))
	}
	errs = append(errs, validateProbe(c.LivenessProbe, p.Child("livenessProbe"), true)...)
	errs = append(errs, validateProbe(c.ReadinessProbe, p.Child("readinessProbe"), false)...)
	errs = append(errs, validateProbe(c.StartupProbe, p.Child("startupProbe"), true)...)
	for j, port := range c.Ports {
		pp := p.Child("ports").Index(j)
		if port.ContainerPort < 1 || port.ContainerPort > 65535 {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, "must be between 1 and 65535, inclusive"))
		}
	}
	for name, req := range c.Resources.Requests {
		rp := p.Child("resources", "requests").Key(string(name))
		if req.Sign() < 0 {
			errs = append(errs, field.Invalid(rp, req.String(), "must be greater than or equal to 0"))
		}
		if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(rp, req.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	for name, lim := range c.Resources.Limits {
		if lim.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("resources", "limits").Key(string(name)), lim.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}

// validatePodSpecUpdate allows only the fields Kubernetes lets a pod update change.
func validatePodSpecUpdate(spec, old *corev1.PodSpec, path *field.Path) field.ErrorList {
	mutable := old.DeepCopy()
	for i := range mutable.Containers {
		if i < len(spec.Containers) {
			mutable.Containers[i].Image = spec.Containers[i].Image
		}
	}
	for i := range mutable.InitContainers {
		if i < len(spec.InitContainers) {
			mutable.InitContainers[i].Image = spec.InitContainers[i].Image
		}
	}
	mutable.ActiveDeadlineSeconds = spec.ActiveDeadlineSeconds
	if len(spec.Tolerations) >= len(old.Tolerations) {
		mutable.Tolerations = spec.Tolerations
	}
	mutable.TerminationGracePeriodSeconds = spec.TerminationGracePeriodSeconds
	if old.NodeName == "" {
		mutable.NodeName = spec.NodeName
	}
	if !apiequality.Semantic.DeepEqual(mutable, spec) {
		return field.ErrorList{field.Forbidden(path, "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")}
	}
	return nil
}

// podQOS computes the pod's QoS class as Kubernetes does.
func podQOS(spec *corev1.PodSpec) corev1.PodQOSClass {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	zero := resource.Quantity{}
	guaranteed := true
	cs := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range cs {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[name]; ok && q.Cmp(zero) > 0 {
				requests[name] = q
			}
			if q, ok := c.Resources.Limits[name]; ok && q.Cmp(zero) > 0 {
				limits[name] = q
			} else {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for _, c := range cs {
			for name, lim := range c.Resources.Limits {
				if req, ok := c.Resources.Requests[name]; ok && req.Cmp(lim) != 0 {
					return corev1.PodQOSBurstable
				}
			}
		}
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// validateSelectorMatches checks a workload's selector against its template labels.
func validateSelectorMatches(sel *metav1.LabelSelector, tmpl map[string]string, path *field.Path) field.ErrorList {
	if sel == nil {
		return field.ErrorList{field.Required(path.Child("selector"), "")}
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return field.ErrorList{field.Invalid(path.Child("selector"), sel, err.Error())}
	}
	if s.Empty() {
		return field.ErrorList{field.Invalid(path.Child("selector"), sel, "empty selector is invalid for deployment")}
	}
	if !s.Matches(labelsSet(tmpl)) {
		return field.ErrorList{field.Invalid(path.Child("template", "metadata", "labels"), tmpl, "`selector` does not match template `labels`")}
	}
	return nil
}

// kubecheck validates rendered Kubernetes manifests (`helm template` output) against
// the Kubernetes API types of k8s.io/api, the same Go types the API server decodes
// into: every document is decoded strictly (an unknown or duplicate field, a wrong
// type or an unknown apiVersion/kind is an error), then checked for what the types
// alone cannot say (names that are DNS labels, selectors that match their pod
// template, probe and service ports that name a container port, requests within
// limits). Usage: kubecheck FILE... (or stdin); exit 1 naming every bad document.
// Why this and not a JSON-schema tool: docs/decisions/0109-oci-image-and-helm-chart.md.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var scheme = runtime.NewScheme()

func init() {
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

// decoder is strict: unknown fields and duplicate fields are errors, not warnings.
var decoder = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
	json.SerializerOptions{Yaml: true, Strict: true})

func main() {
	var inputs []io.Reader
	if len(os.Args) == 1 {
		inputs = append(inputs, os.Stdin)
	}
	for _, p := range os.Args[1:] {
		f, err := os.Open(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubecheck:", err)
			os.Exit(2)
		}
		defer f.Close()
		inputs = append(inputs, f)
	}
	count, bad := 0, 0
	kinds := map[string]int{}
	for _, in := range inputs {
		r := utilyaml.NewYAMLReader(bufio.NewReader(in))
		for {
			doc, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "kubecheck: reading YAML:", err)
				os.Exit(2)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			count++
			obj, gvk, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				bad++
				fmt.Fprintf(os.Stderr, "kubecheck: document %d: %v\n", count, err)
				continue
			}
			kinds[gvk.Kind]++
			for _, problem := range check(obj) {
				bad++
				fmt.Fprintf(os.Stderr, "kubecheck: %s %s: %s\n", gvk.Kind, name(obj), problem)
			}
		}
	}
	if count == 0 {
		fmt.Fprintln(os.Stderr, "kubecheck: no documents")
		os.Exit(1)
	}
	fmt.Printf("kubecheck: %d documents %v, %d problems\n", count, kinds, bad)
	if bad > 0 {
		os.Exit(1)
	}
}

func stripComments(doc []byte) []byte {
	var out []string
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out = append(out, line)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

func name(obj runtime.Object) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetName()
	}
	return "?"
}

// check returns what is wrong with obj beyond its shape.
func check(obj runtime.Object) []string {
	var problems []string
	if m, ok := obj.(metav1.Object); ok {
		for _, e := range validation.IsDNS1123Subdomain(m.GetName()) {
			problems = append(problems, "metadata.name: "+e)
		}
		for k, v := range m.GetLabels() {
			for _, e := range validation.IsQualifiedName(k) {
				problems = append(problems, "label "+k+": "+e)
			}
			for _, e := range validation.IsValidLabelValue(v) {
				problems = append(problems, "label "+k+": "+e)
			}
		}
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		problems = append(problems, workload(o.Spec.Selector, &o.Spec.Template)...)
	case *appsv1.StatefulSet:
		problems = append(problems, workload(o.Spec.Selector, &o.Spec.Template)...)
		if o.Spec.ServiceName == "" {
			problems = append(problems, "spec.serviceName: required for stable pod names")
		}
	case *corev1.Service:
		if len(o.Spec.Selector) == 0 {
			problems = append(problems, "spec.selector: empty (selects nothing)")
		}
		for _, p := range o.Spec.Ports {
			if p.Port < 1 || p.Port > 65535 {
				problems = append(problems, fmt.Sprintf("port %d out of range", p.Port))
			}
		}
	case *policyv1.PodDisruptionBudget:
		if o.Spec.Selector == nil || len(o.Spec.Selector.MatchLabels) == 0 {
			problems = append(problems, "spec.selector: empty")
		}
		if (o.Spec.MinAvailable == nil) == (o.Spec.MaxUnavailable == nil) {
			problems = append(problems, "exactly one of minAvailable and maxUnavailable")
		}
	}
	return problems
}

func workload(sel *metav1.LabelSelector, tpl *corev1.PodTemplateSpec) []string {
	var problems []string
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || sel == nil || s.Empty() {
		problems = append(problems, fmt.Sprintf("spec.selector: missing or invalid (%v)", err))
	} else if !s.Matches(labels.Set(tpl.Labels)) {
		problems = append(problems, "spec.selector does not match the pod template's labels")
	}
	if len(tpl.Spec.Containers) == 0 {
		problems = append(problems, "no containers")
	}
	volumes := map[string]bool{}
	for _, v := range tpl.Spec.Volumes {
		volumes[v.Name] = true
	}
	for _, c := range tpl.Spec.Containers {
		problems = append(problems, container(c, volumes)...)
	}
	return problems
}

func container(c corev1.Container, volumes map[string]bool) []string {
	var problems []string
	if c.Image == "" {
		problems = append(problems, c.Name+": no image")
	}
	ports := map[string]bool{}
	for _, p := range c.Ports {
		if p.Name != "" {
			for _, e := range validation.IsValidPortName(p.Name) {
				problems = append(problems, c.Name+": port name "+p.Name+": "+e)
			}
			ports[p.Name] = true
		}
		if p.ContainerPort < 1 || p.ContainerPort > 65535 {
			problems = append(problems, fmt.Sprintf("%s: containerPort %d out of range", c.Name, p.ContainerPort))
		}
	}
	for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
		if probe != nil && probe.HTTPGet != nil && probe.HTTPGet.Port.Type == intstr.String && !ports[probe.HTTPGet.Port.StrVal] {
			problems = append(problems, c.Name+": probe port "+probe.HTTPGet.Port.StrVal+" is no container port")
		}
	}
	for _, e := range c.Env {
		for _, msg := range validation.IsEnvVarName(e.Name) {
			problems = append(problems, c.Name+": env "+e.Name+": "+msg)
		}
	}
	for _, m := range c.VolumeMounts {
		if !volumes[m.Name] {
			problems = append(problems, c.Name+": volumeMount "+m.Name+" names no volume")
		}
	}
	for res, limit := range c.Resources.Limits {
		if req, ok := c.Resources.Requests[res]; ok && req.Cmp(limit) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %s request %s above its limit %s", c.Name, res, req.String(), limit.String()))
		}
	}
	return problems
}

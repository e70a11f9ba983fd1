// Package rulecheck tells cheaply whether an object passes every x-kubernetes-validations
// rule of a structural schema. It evaluates the same programs apiextensions-apiserver's
// CEL validator compiles, node by node in the same order and against the same cost
// budget, but over a schema adaptor built once per schema: the library's adaptor builds a
// map of a node's properties on every field access, which made CEL most of a custom
// object's validation cost. It reports only "all passed"; whoever gets false asks the
// library's validator for the errors, so every error keeps Kubernetes' exact form.
//
// Where the static worst case of all of an object's rules fits the runtime cost budget,
// the rules of a node are evaluated as one program (the rules joined with &&): cel-go
// tracks cost in every program of Kubernetes' environment, and each evaluation carries
// a fixed cost (a cost tracker, the details, the observers) that five rules paid five
// times. Rules of a few simple shapes are answered without CEL where their answer is
// certain (direct.go).
package rulecheck

import (
	"context"
	"math"
	"math/bits"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiextensionscel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Checker holds a schema's compiled rules, one node per schema node that has rules or a
// descendant with rules, as apiextensions-apiserver's cel.Validator lays them out.
type Checker struct {
	root *node
	// worstCost is the static worst-case cost of every rule of an object: the sum over
	// the rules of the estimated maximum cost of one evaluation times the most times the
	// rule's node can occur in a request (saturating at math.MaxUint64).
	worstCost uint64
}

type node struct {
	// programs are the node's rules, in the schema's order.
	programs []apiextensionscel.CompilationResult
	// all, when the node has more than one rule, is one program of all of them: the
	// rules joined with &&, compiled as a rule of the node. It is true exactly when every
	// rule is, and evaluates them in one call (see Passes for when it is used).
	all cel.Program
	// self is the node's schema as CEL sees it (with apiVersion, kind and metadata at a
	// resource root), its property index built once.
	self common.Schema
	// closed is set when the node's schema and everything below it name every field
	// they keep and embed no resource, and the node is not a resource root: CEL then
	// reads the node's value as a closedObject.
	closed bool
	// direct holds the direct form of each of the node's rules (direct.go) when every
	// rule has one, and directCost the sum of their cost bounds.
	direct     []*direct
	directCost uint64
	items      *node
	additional *node
	properties map[string]*node
}

// New compiles the rules of s (a resource root) with the environment and per-call limit
// apiextensions-apiserver's strategy uses. It returns nil when s has no rules, and nil
// when some rule is outside what the checker mirrors (a rule that reads oldSelf, rules
// under allOf, a rule or declaration that does not compile): the library's validator
// alone must then be used.
func New(s *structuralschema.Structural, perCallLimit uint64) *Checker {
	if s == nil || !hasRules(s) {
		return nil
	}
	envSet := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	root, ok := build(s, newIndexed(&model.Structural{Structural: s}), true, model.SchemaDeclType(s, true), perCallLimit, envSet)
	if !ok || root == nil {
		return nil
	}
	return &Checker{root: root, worstCost: root.worstCost(s, 1)}
}

// worstCost bounds the cost of evaluating every rule of n and its descendants on one
// object: the sum over the rules of their estimated maximum cost (CompilationResult's
// MaxCost, the estimate the library holds a CRD's rules to) times the most times the
// rule's node can occur in an object, card for n. s is n's schema. A node under a list
// or map without maxItems or maxProperties can occur any number of times: the bound is
// then math.MaxUint64, as it is when the sum overflows. Objects whose lists or maps
// exceed those limits fail the schema's own validation, and the checker's verdict is
// not asked for them.
func (n *node) worstCost(s *structuralschema.Structural, card uint64) uint64 {
	if n == nil {
		return 0
	}
	var total uint64
	add := func(c uint64) {
		if total > math.MaxUint64-c {
			total = math.MaxUint64
			return
		}
		total += c
	}
	for _, c := range n.programs {
		if c.Program == nil {
			continue
		}
		if hi, lo := bits.Mul64(c.MaxCost, card); hi != 0 {
			add(math.MaxUint64)
		} else {
			add(lo)
		}
	}
	times := func(limit *int64) uint64 {
		if limit == nil || *limit < 0 {
			return math.MaxUint64
		}
		if hi, lo := bits.Mul64(card, uint64(*limit)); hi == 0 {
			return lo
		}
		return math.MaxUint64
	}
	if n.items != nil {
		var maxItems *int64
		if s.ValueValidation != nil {
			maxItems = s.ValueValidation.MaxItems
		}
		add(n.items.worstCost(s.Items, times(maxItems)))
	}
	if n.additional != nil {
		var maxProperties *int64
		if s.ValueValidation != nil {
			maxProperties = s.ValueValidation.MaxProperties
		}
		add(n.additional.worstCost(s.AdditionalProperties.Structural, times(maxProperties)))
	}
	for k, p := range n.properties {
		ps := s.Properties[k]
		add(p.worstCost(&ps, card))
	}
	return total
}

// compileAll compiles the rules of s joined with && as one rule of s, in the same
// environment and with the same per-call limit as each, or returns nil. Each rule is put
// in parentheses on lines of its own, so that a comment at the end of a rule ends there.
func compileAll(s *structuralschema.Structural, compiled []apiextensionscel.CompilationResult, declType *apiservercel.DeclType, perCallLimit uint64, envSet *environment.EnvSet) cel.Program {
	var rules []string
	for i, c := range compiled {
		if c.Program != nil {
			rules = append(rules, "(\n"+s.XValidations[i].Rule+"\n)")
		}
	}
	if len(rules) < 2 {
		return nil
	}
	joined := *s
	joined.XValidations = apiextensionsv1.ValidationRules{{Rule: strings.Join(rules, " && ")}}
	all, err := apiextensionscel.Compile(&joined, declType, perCallLimit, envSet, apiextensionscel.StoredExpressionsEnvLoader())
	if err != nil || len(all) != 1 || all[0].Error != nil || all[0].Program == nil || all[0].UsesOldSelf {
		return nil
	}
	return all[0].Program
}

// build mirrors cel.validator: the same declaration types, the same properties skipped.
// ix is s indexed: the nodes below share its children rather than index their subtrees
// again. ok is false when the checker cannot stand in for the library on this schema.
func build(s *structuralschema.Structural, ix *indexed, resourceRoot bool, declType *apiservercel.DeclType, perCallLimit uint64, envSet *environment.EnvSet) (n *node, ok bool) {
	if s.ValueValidation != nil && len(s.ValueValidation.AllOf) > 0 {
		for i := range s.ValueValidation.AllOf {
			if nestedHasRules(&s.ValueValidation.AllOf[i]) {
				return nil, false
			}
		}
	}
	loader := &recordingLoader{EnvLoader: apiextensionscel.StoredExpressionsEnvLoader(), envs: map[string]*cel.Env{}}
	compiled, err := apiextensionscel.Compile(s, declType, perCallLimit, envSet, loader)
	if err != nil {
		return nil, false
	}
	for _, c := range compiled {
		if c.Error != nil || c.UsesOldSelf || c.MessageExpressionError != nil {
			return nil, false
		}
	}
	n = &node{programs: compiled, all: compileAll(s, compiled, declType, perCallLimit, envSet)}
	n.direct, n.directCost = directRules(s, compiled, loader.envs, resourceRoot, perCallLimit)
	var elemType *apiservercel.DeclType
	if declType != nil {
		elemType = declType.ElemType
	}
	if s.Items != nil {
		if n.items, ok = build(s.Items, ix.items.(*indexed), s.Items.XEmbeddedResource, elemType, perCallLimit, envSet); !ok {
			return nil, false
		}
	}
	for k := range s.Properties {
		prop := s.Properties[k]
		var fieldType *apiservercel.DeclType
		if escaped, escapable := apiservercel.Escape(k); escapable {
			if declType == nil {
				continue
			}
			f, found := declType.Fields[escaped]
			if !found {
				continue
			}
			fieldType = f.Type
		} else {
			if fieldType = model.SchemaDeclType(&prop, prop.XEmbeddedResource); fieldType == nil {
				continue
			}
		}
		p, pok := build(&prop, ix.properties[k].(*indexed), prop.XEmbeddedResource, fieldType, perCallLimit, envSet)
		if !pok {
			return nil, false
		}
		if p != nil {
			if n.properties == nil {
				n.properties = map[string]*node{}
			}
			n.properties[k] = p
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		ap := s.AdditionalProperties.Structural
		if n.additional, ok = build(ap, ix.additional.(*indexedOrBool).schema, ap.XEmbeddedResource, elemType, perCallLimit, envSet); !ok {
			return nil, false
		}
	}
	if len(compiled) == 0 && n.items == nil && n.additional == nil && len(n.properties) == 0 {
		return nil, true
	}
	if len(compiled) > 0 {
		n.self = ix
		if resourceRoot {
			n.self = newIndexed(&model.Structural{Structural: model.WithTypeAndObjectMeta(s)})
		}
		n.closed = !resourceRoot && closed(s)
	}
	return n, true
}

// Passes reports whether obj (a whole custom object) passes every rule within budget,
// the runtime cost budget the library's validator is given for the same object. False
// means "ask the library": a rule failed, did not evaluate, or the budget ran out.
func (c *Checker) Passes(ctx context.Context, obj map[string]any, budget int64) bool {
	if c == nil {
		return true
	}
	// The joined programs stand in for the rules only when the budget cannot run out for
	// the library's validator, whatever the object: then whether each rule's cost fits the
	// remaining budget, which the library checks rule by rule, cannot change its verdict.
	// The runtime cost of each evaluation is still taken from the budget and held to the
	// per-call limit, the joined rules' together.
	joined := c.worstCost <= uint64(max(budget, 0))
	return c.root.passes(ctx, obj, &budget, joined)
}

func (n *node) passes(ctx context.Context, obj any, budget *int64, joined bool) bool {
	if n == nil || obj == nil {
		return true
	}
	if len(n.programs) > 0 {
		if *budget <= 0 {
			return false
		}
		if !n.directPasses(obj, budget) && !n.programsPass(ctx, obj, budget, joined) {
			return false
		}
	}
	switch obj := obj.(type) {
	case []any:
		if n.items != nil {
			for _, e := range obj {
				if !n.items.passes(ctx, e, budget, joined) {
					return false
				}
			}
		}
	case map[string]any:
		if n.additional != nil {
			for _, v := range obj {
				if !n.additional.passes(ctx, v, budget, joined) {
					return false
				}
			}
		}
		if n.properties != nil {
			for k, v := range obj {
				if sub, ok := n.properties[k]; ok && !sub.passes(ctx, v, budget, joined) {
					return false
				}
			}
		}
	}
	return true
}

// directPasses reports whether the direct forms of the node's rules all answer true for
// obj within the budget, taking their cost bounds from it; false (the budget untouched)
// means the programs must tell.
func (n *node) directPasses(obj any, budget *int64) bool {
	if n.direct == nil || n.directCost > uint64(*budget) {
		return false
	}
	for _, d := range n.direct {
		if v, known := d.eval(obj); !known || !v.b {
			return false
		}
	}
	*budget -= int64(n.directCost)
	return true
}

// programsPass evaluates the node's programs on obj: the joined one when joined allows
// it, each rule's otherwise.
func (n *node) programsPass(ctx context.Context, obj any, budget *int64, joined bool) bool {
	// One execution frame for the node's rules, where ContextEval would set up a frame
	// and a cancelable context per rule: Eval given a frame evaluates in it as
	// ContextEval does in its own. The programs have no default variables (the only
	// thing a frame of ContextEval's would add), each evaluation gets its own cost
	// tracker from the program, and only comprehensions read the frame's context: they
	// may see a cancelled request at other iterations than in frames of their own, which
	// ends in an error here as there, and the library is asked.
	self := common.UnstructuredToVal
	if n.closed {
		self = closedVal
	}
	frame, err := interpreter.NewExecutionFrame(&activation{self: self(obj, n.self)})
	if err != nil {
		return false
	}
	defer frame.Close()
	if err := frame.SetContext(ctx, celconfig.CheckFrequency); err != nil {
		return false
	}
	if joined && n.all != nil {
		if !eval(n.all, frame, budget) {
			return false
		}
	} else {
		for _, c := range n.programs {
			if c.Program != nil && !eval(c.Program, frame, budget) {
				return false
			}
		}
	}
	return true
}

// eval evaluates p in frame and reports whether it gave true within the budget, taking
// its runtime cost from the budget.
func eval(p cel.Program, frame *interpreter.ExecutionFrame, budget *int64) bool {
	val, details, err := p.Eval(frame)
	if details == nil {
		return false
	}
	cost := details.ActualCost()
	if cost == nil || *cost > math.MaxInt64 || int64(*cost) > *budget {
		return false
	}
	*budget -= int64(*cost)
	return err == nil && val == types.True
}

// activation binds self, as the library's activation does for rules without oldSelf.
type activation struct {
	self ref.Val
}

func (a *activation) ResolveName(name string) (any, bool) {
	if name == apiextensionscel.ScopedVarName {
		return a.self, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

var _ interpreter.Activation = (*activation)(nil)

// recordingLoader is the environment loader the library compiles with, keeping the
// environment of each rule so that the rule's checked expression can be read.
type recordingLoader struct {
	apiextensionscel.EnvLoader
	envs map[string]*cel.Env
}

func (l *recordingLoader) RuleEnv(envSet *environment.EnvSet, expression string) *cel.Env {
	env := l.EnvLoader.RuleEnv(envSet, expression)
	l.envs[expression] = env
	return env
}

// directRules returns the direct form of every rule of s that compiled (in compiled)
// and the sum of their cost bounds, or nil when some rule has none or the bounds exceed
// the per-call limit. envs are the rules' environments by text: a rule compiled again
// in its own gives the expression the library's program was planned from.
func directRules(s *structuralschema.Structural, compiled []apiextensionscel.CompilationResult, envs map[string]*cel.Env, root bool, perCallLimit uint64) ([]*direct, uint64) {
	var out []*direct
	var total uint64
	for i, c := range compiled {
		if c.Program == nil {
			continue
		}
		rule := s.XValidations[i].Rule
		env := envs[rule]
		if env == nil {
			return nil, 0
		}
		ast, iss := env.Compile(rule)
		if iss != nil && iss.Err() != nil {
			return nil, 0
		}
		d := compileDirect(ast, s, root)
		if d == nil || d.cost > perCallLimit {
			return nil, 0
		}
		out = append(out, d)
		total = addCost(total, d.cost)
	}
	if total > math.MaxInt64 {
		return nil, 0
	}
	return out, total
}

func hasRules(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if len(s.XValidations) > 0 || hasRules(s.Items) {
		return true
	}
	if s.AdditionalProperties != nil && hasRules(s.AdditionalProperties.Structural) {
		return true
	}
	for k := range s.Properties {
		p := s.Properties[k]
		if hasRules(&p) {
			return true
		}
	}
	return false
}

func nestedHasRules(s *structuralschema.NestedValueValidation) bool {
	if s == nil {
		return false
	}
	if len(s.ValidationExtensions.XValidations) > 0 || nestedHasRules(s.Items) || nestedHasRules(s.AdditionalProperties) {
		return true
	}
	for k := range s.Properties {
		p := s.Properties[k]
		if nestedHasRules(&p) {
			return true
		}
	}
	return false
}

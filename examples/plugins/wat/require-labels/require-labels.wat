;; require-labels: a wasmplane validate plugin written by hand in WAT (ABI v1, sdk/ABI.md).
;; Objects must carry the labels listed in config.labels, and pods may not use ":latest"
;; (or untagged) images: the behaviour of examples/plugins/go/require-labels.
;;
;; JSON is read in place, without decoding: member names and strings are compared by
;; their raw (escaped) text, which is what the host and kubectl send for ordinary names.
;; A name written with escapes (say "t\u0065am") does not match; see README.md.
;;
;; Memory: 0–1023 unused (so 0 means "absent"), 1024–2303 literals, 4096–6143 the label
;; table (count, then ptr/len pairs), 65536 onward a bump heap. Answers are written at the
;; top of the heap: the host copies them out before its next call, alloc included.
(module
  (memory (export "memory") 2)

  (data (i32.const 1024) "config")
  (data (i32.const 1056) "labels")
  (data (i32.const 1088) "operation")
  (data (i32.const 1120) "CREATE")
  (data (i32.const 1152) "UPDATE")
  (data (i32.const 1184) "object")
  (data (i32.const 1216) "metadata")
  (data (i32.const 1248) "kind")
  (data (i32.const 1280) "Pod")
  (data (i32.const 1312) "spec")
  (data (i32.const 1344) "initContainers")
  (data (i32.const 1376) "containers")
  (data (i32.const 1408) "image")
  (data (i32.const 1440) "name")
  (data (i32.const 1472) "@sha256:")
  (data (i32.const 1504) "latest")
  (data (i32.const 1536) "{\"allowed\":true}")
  (data (i32.const 1600) "{\"allowed\":false,\"code\":403,\"reason\":\"Forbidden\",\"message\":\"")
  (data (i32.const 1728) "\"}")
  (data (i32.const 1760) "; ")
  (data (i32.const 1792) "label \\\"")
  (data (i32.const 1824) "\\\" is required")
  (data (i32.const 1856) "container \\\"")
  (data (i32.const 1888) "\\\": image \\\"")
  (data (i32.const 1920) "\\\" must be pinned to a tag other than latest")
  (data (i32.const 1984) "{\"error\":\"config.labels must be a list of strings\"}")
  (data (i32.const 2048) "{\"error\":\"object is not a JSON object\"}")
  (data (i32.const 2112) "{\"error\":\"request is not a JSON object\"}")
  (data (i32.const 2176) "{}")
  (data (i32.const 2208) "{\"error\":\"too many labels\"}")

  (global $heap (mut i32) (i32.const 65536))
  ;; $vend is the end of the value that $get found (a second result, kept in a global so
  ;; that the module needs no multi-value support).
  (global $vend (mut i32) (i32.const 0))
  ;; The answer being written: $out is where it starts, $op the next free byte.
  (global $out (mut i32) (i32.const 0))
  (global $op (mut i32) (i32.const 0))
  ;; Whether the current answer is a denial whose message has begun.
  (global $denied (mut i32) (i32.const 0))

  (func (export "wasmplane_abi_version") (result i32) (i32.const 1))

  ;; $ensure grows memory so that $end is addressable; false when the limit forbids it.
  (func $ensure (param $end i32) (result i32)
    (local $have i32)
    (local.set $have (i32.shl (memory.size) (i32.const 16)))
    (if (i32.le_u (local.get $end) (local.get $have)) (then (return (i32.const 1))))
    (i32.ne
      (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (local.get $have)) (i32.const 16)) (i32.const 1)))
      (i32.const -1)))

  ;; A bump allocator is enough: the host reuses its request buffer, and configure's copies
  ;; live as long as the instance. Freeing is a no-op.
  (func $alloc (export "wasmplane_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (if (i32.eqz (call $ensure (local.get $end))) (then (return (i32.const 0))))
    (global.set $heap (local.get $end))
    (local.get $p))

  ;; ---- output -------------------------------------------------------------------

  (func $begin
    (global.set $out (global.get $heap))
    (global.set $op (global.get $heap))
    (global.set $denied (i32.const 0)))

  ;; $emit appends n bytes at p. Running out of memory traps: the call fails, the host
  ;; discards the instance.
  (func $emit (param $p i32) (param $n i32)
    (if (i32.eqz (call $ensure (i32.add (global.get $op) (local.get $n)))) (then (unreachable)))
    (memory.copy (global.get $op) (local.get $p) (local.get $n))
    (global.set $op (i32.add (global.get $op) (local.get $n))))

  ;; $emit_esc appends the raw text of a JSON string (p..e) escaped once more, so that it
  ;; shows quoted inside a message: \ becomes \\ and " becomes \".
  (func $emit_esc (param $p i32) (param $e i32)
    (local $c i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $p) (local.get $e)))
        (local.set $c (i32.load8_u (local.get $p)))
        (if (i32.or (i32.eq (local.get $c) (i32.const 34)) (i32.eq (local.get $c) (i32.const 92)))
          (then
            (i32.store8 (i32.const 1000) (i32.const 92))
            (call $emit (i32.const 1000) (i32.const 1))))
        (i32.store8 (i32.const 1000) (local.get $c))
        (call $emit (i32.const 1000) (i32.const 1))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $next))))

  ;; $problem starts a denial, or separates this problem from the previous one.
  (func $problem
    (if (global.get $denied)
      (then (call $emit (i32.const 1760) (i32.const 2)))
      (else
        (call $emit (i32.const 1600) (i32.const 60))
        (global.set $denied (i32.const 1)))))

  ;; (ptr << 32) | len of the answer written since $begin.
  (func $answer (result i64)
    (i64.or
      (i64.shl (i64.extend_i32_u (global.get $out)) (i64.const 32))
      (i64.extend_i32_u (i32.sub (global.get $op) (global.get $out)))))

  ;; $fixed answers with n bytes of a literal.
  (func $fixed (param $p i32) (param $n i32) (result i64)
    (call $begin)
    (call $emit (local.get $p) (local.get $n))
    (call $answer))

  ;; ---- JSON reading -------------------------------------------------------------

  (func $ws (param $p i32) (param $e i32) (result i32)
    (local $c i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $p) (local.get $e)))
        (local.set $c (i32.load8_u (local.get $p)))
        (br_if $done (i32.and
          (i32.and (i32.ne (local.get $c) (i32.const 32)) (i32.ne (local.get $c) (i32.const 9)))
          (i32.and (i32.ne (local.get $c) (i32.const 10)) (i32.ne (local.get $c) (i32.const 13)))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $next)))
    (local.get $p))

  ;; $skip_str returns the byte after the string that starts (with its quote) at p, or 0.
  (func $skip_str (param $p i32) (param $e i32) (result i32)
    (local $c i32)
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (loop $next
      (if (i32.ge_u (local.get $p) (local.get $e)) (then (return (i32.const 0))))
      (local.set $c (i32.load8_u (local.get $p)))
      (if (i32.eq (local.get $c) (i32.const 34)) (then (return (i32.add (local.get $p) (i32.const 1)))))
      (local.set $p (i32.add (local.get $p)
        (select (i32.const 2) (i32.const 1) (i32.eq (local.get $c) (i32.const 92)))))
      (br $next))
    (i32.const 0))

  ;; $skip returns the byte after the value that starts at p, or 0. It tracks nesting and
  ;; strings, not the whole grammar: the host sends JSON it encoded itself.
  (func $skip (param $p i32) (param $e i32) (result i32)
    (local $c i32) (local $depth i32) (local $s i32)
    (if (i32.ge_u (local.get $p) (local.get $e)) (then (return (i32.const 0))))
    (local.set $c (i32.load8_u (local.get $p)))
    (if (i32.eq (local.get $c) (i32.const 34)) (then (return (call $skip_str (local.get $p) (local.get $e)))))
    (if (i32.or (i32.eq (local.get $c) (i32.const 123)) (i32.eq (local.get $c) (i32.const 91)))
      (then
        (loop $next
          (if (i32.ge_u (local.get $p) (local.get $e)) (then (return (i32.const 0))))
          (local.set $c (i32.load8_u (local.get $p)))
          (if (i32.eq (local.get $c) (i32.const 34))
            (then
              (local.set $p (call $skip_str (local.get $p) (local.get $e)))
              (if (i32.eqz (local.get $p)) (then (return (i32.const 0))))
              (br $next)))
          (if (i32.or (i32.eq (local.get $c) (i32.const 123)) (i32.eq (local.get $c) (i32.const 91)))
            (then (local.set $depth (i32.add (local.get $depth) (i32.const 1)))))
          (if (i32.or (i32.eq (local.get $c) (i32.const 125)) (i32.eq (local.get $c) (i32.const 93)))
            (then
              (local.set $depth (i32.sub (local.get $depth) (i32.const 1)))
              (if (i32.eqz (local.get $depth)) (then (return (i32.add (local.get $p) (i32.const 1)))))))
          (local.set $p (i32.add (local.get $p) (i32.const 1)))
          (br $next))))
    ;; A number or a literal runs to the next delimiter.
    (local.set $s (local.get $p))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $p) (local.get $e)))
        (local.set $c (i32.load8_u (local.get $p)))
        (br_if $done (i32.or (i32.or (i32.eq (local.get $c) (i32.const 44)) (i32.eq (local.get $c) (i32.const 125)))
                             (i32.or (i32.eq (local.get $c) (i32.const 93)) (i32.le_u (local.get $c) (i32.const 32)))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $next)))
    (select (local.get $p) (i32.const 0) (i32.gt_u (local.get $p) (local.get $s))))

  ;; $is tells whether the value p..e is a string whose raw text is the n bytes at k.
  (func $is (param $p i32) (param $e i32) (param $k i32) (param $n i32) (result i32)
    (local $i i32)
    (if (i32.eqz (local.get $p)) (then (return (i32.const 0))))
    (if (i32.ne (i32.sub (local.get $e) (local.get $p)) (i32.add (local.get $n) (i32.const 2))) (then (return (i32.const 0))))
    (if (i32.ne (i32.load8_u (local.get $p)) (i32.const 34)) (then (return (i32.const 0))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (if (i32.ne (i32.load8_u (i32.add (i32.add (local.get $p) (i32.const 1)) (local.get $i)))
                    (i32.load8_u (i32.add (local.get $k) (local.get $i))))
          (then (return (i32.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 1))

  ;; $get finds the member named by the n bytes at k in the object p..e: it returns the
  ;; start of its value and sets $vend to its end; 0 when p is 0, not an object, or the
  ;; member is absent.
  (func $get (param $p i32) (param $e i32) (param $k i32) (param $n i32) (result i32)
    (local $ke i32) (local $v i32) (local $ve i32) (local $hit i32)
    (if (i32.eqz (local.get $p)) (then (return (i32.const 0))))
    (if (i32.ne (i32.load8_u (local.get $p)) (i32.const 123)) (then (return (i32.const 0))))
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (loop $member
      (local.set $p (call $ws (local.get $p) (local.get $e)))
      (if (i32.ge_u (local.get $p) (local.get $e)) (then (return (i32.const 0))))
      (if (i32.eq (i32.load8_u (local.get $p)) (i32.const 44))
        (then (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1)) (local.get $e)))))
      (if (i32.ne (i32.load8_u (local.get $p)) (i32.const 34)) (then (return (i32.const 0))))
      (local.set $ke (call $skip_str (local.get $p) (local.get $e)))
      (if (i32.eqz (local.get $ke)) (then (return (i32.const 0))))
      (local.set $hit (call $is (local.get $p) (local.get $ke) (local.get $k) (local.get $n)))
      (local.set $p (call $ws (local.get $ke) (local.get $e)))
      (if (i32.ne (i32.load8_u (local.get $p)) (i32.const 58)) (then (return (i32.const 0))))
      (local.set $v (call $ws (i32.add (local.get $p) (i32.const 1)) (local.get $e)))
      (local.set $ve (call $skip (local.get $v) (local.get $e)))
      (if (i32.eqz (local.get $ve)) (then (return (i32.const 0))))
      (if (local.get $hit)
        (then
          (global.set $vend (local.get $ve))
          (return (local.get $v))))
      (local.set $p (local.get $ve))
      (br $member))
    (i32.const 0))

  ;; $elem returns the start of the array element at or after cursor p (skipping a comma),
  ;; or 0 at the end of the array p..e; $vend is set to the element's end.
  (func $elem (param $p i32) (param $e i32) (result i32)
    (local $ve i32)
    (local.set $p (call $ws (local.get $p) (local.get $e)))
    (if (i32.ge_u (local.get $p) (local.get $e)) (then (return (i32.const 0))))
    (if (i32.eq (i32.load8_u (local.get $p)) (i32.const 44))
      (then (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1)) (local.get $e)))))
    (if (i32.eq (i32.load8_u (local.get $p)) (i32.const 93)) (then (return (i32.const 0))))
    (local.set $ve (call $skip (local.get $p) (local.get $e)))
    (if (i32.eqz (local.get $ve)) (then (return (i32.const 0))))
    (global.set $vend (local.get $ve))
    (local.get $p))

  ;; ---- configure ----------------------------------------------------------------

  (func (export "configure") (param $ptr i32) (param $len i32) (result i64)
    (local $e i32) (local $p i32) (local $pe i32) (local $v i32) (local $ve i32) (local $n i32) (local $copy i32)
    (local.set $e (i32.add (local.get $ptr) (local.get $len)))
    (local.set $p (call $get (call $ws (local.get $ptr) (local.get $e)) (local.get $e) (i32.const 1024) (i32.const 6)))
    (local.set $pe (global.get $vend))
    (local.set $p (call $get (local.get $p) (local.get $pe) (i32.const 1056) (i32.const 6)))
    (local.set $pe (global.get $vend))
    (if (i32.eqz (local.get $p)) (then (return (call $fixed (i32.const 2176) (i32.const 2)))))
    (if (i32.eq (i32.load8_u (local.get $p)) (i32.const 110)) ;; null
      (then (return (call $fixed (i32.const 2176) (i32.const 2)))))
    (if (i32.ne (i32.load8_u (local.get $p)) (i32.const 91))
      (then (return (call $fixed (i32.const 1984) (i32.const 51)))))
    (local.set $v (i32.add (local.get $p) (i32.const 1)))
    (block $done
      (loop $next
        (local.set $v (call $elem (local.get $v) (local.get $pe)))
        (br_if $done (i32.eqz (local.get $v)))
        (local.set $ve (global.get $vend))
        (if (i32.ne (i32.load8_u (local.get $v)) (i32.const 34))
          (then (return (call $fixed (i32.const 1984) (i32.const 51)))))
        (local.set $n (i32.load (i32.const 4096)))
        (if (i32.ge_u (local.get $n) (i32.const 255))
          (then (return (call $fixed (i32.const 2208) (i32.const 27)))))
        ;; Keep the raw text between the quotes: the request buffer is reused.
        (local.set $copy (call $alloc (i32.sub (i32.sub (local.get $ve) (local.get $v)) (i32.const 2))))
        (if (i32.eqz (local.get $copy)) (then (unreachable)))
        (memory.copy (local.get $copy) (i32.add (local.get $v) (i32.const 1)) (i32.sub (i32.sub (local.get $ve) (local.get $v)) (i32.const 2)))
        (i32.store (i32.add (i32.const 4100) (i32.shl (local.get $n) (i32.const 3))) (local.get $copy))
        (i32.store (i32.add (i32.const 4104) (i32.shl (local.get $n) (i32.const 3)))
          (i32.sub (i32.sub (local.get $ve) (local.get $v)) (i32.const 2)))
        (i32.store (i32.const 4096) (i32.add (local.get $n) (i32.const 1)))
        (local.set $v (local.get $ve))
        (br $next)))
    (call $fixed (i32.const 2176) (i32.const 2)))

  ;; ---- validate -----------------------------------------------------------------

  ;; $find tells whether the n bytes at k occur in p..e.
  (func $find (param $p i32) (param $e i32) (param $k i32) (param $n i32) (result i32)
    (local $i i32)
    (block $done
      (loop $at
        (br_if $done (i32.gt_u (i32.add (local.get $p) (local.get $n)) (local.get $e)))
        (local.set $i (i32.const 0))
        (block $miss
          (loop $cmp
            (if (i32.ge_u (local.get $i) (local.get $n)) (then (return (i32.const 1))))
            (br_if $miss (i32.ne (i32.load8_u (i32.add (local.get $p) (local.get $i)))
                                 (i32.load8_u (i32.add (local.get $k) (local.get $i)))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $cmp)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $at)))
    (i32.const 0))

  ;; $latest tells whether the image reference p..e (raw string text) resolves to the
  ;; latest tag: no digest, and no tag after the last "/" or the tag "latest".
  (func $latest (param $p i32) (param $e i32) (result i32)
    (local $i i32) (local $colon i32)
    (if (call $find (local.get $p) (local.get $e) (i32.const 1472) (i32.const 8)) (then (return (i32.const 0))))
    (local.set $i (local.get $p))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $e)))
        (if (i32.eq (i32.load8_u (local.get $i)) (i32.const 47)) (then (local.set $colon (i32.const 0))))
        (if (i32.and (i32.eqz (local.get $colon)) (i32.eq (i32.load8_u (local.get $i)) (i32.const 58)))
          (then (local.set $colon (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (if (i32.eqz (local.get $colon)) (then (return (i32.const 1))))
    (i32.and
      (i32.eq (i32.sub (local.get $e) (local.get $colon)) (i32.const 7))
      (call $find (i32.add (local.get $colon) (i32.const 1)) (local.get $e) (i32.const 1504) (i32.const 6))))

  ;; $check_images records a problem for every container of the array p..e whose image
  ;; resolves to latest.
  (func $check_images (param $p i32) (param $e i32)
    (local $c i32) (local $ce i32) (local $img i32) (local $imge i32) (local $name i32) (local $namee i32)
    (if (i32.eqz (local.get $p)) (then (return)))
    (if (i32.ne (i32.load8_u (local.get $p)) (i32.const 91)) (then (return)))
    (local.set $c (i32.add (local.get $p) (i32.const 1)))
    (block $done
      (loop $next
        (local.set $c (call $elem (local.get $c) (local.get $e)))
        (br_if $done (i32.eqz (local.get $c)))
        (local.set $ce (global.get $vend))
        (local.set $img (call $get (local.get $c) (local.get $ce) (i32.const 1408) (i32.const 5)))
        (local.set $imge (global.get $vend))
        ;; A missing or non-string image counts as the empty reference, which is untagged.
        (if (i32.or (i32.eqz (local.get $img)) (i32.ne (i32.load8_u (local.get $img)) (i32.const 34)))
          (then (local.set $img (i32.const 1000)) (local.set $imge (i32.const 1000)))
          (else
            (local.set $img (i32.add (local.get $img) (i32.const 1)))
            (local.set $imge (i32.sub (local.get $imge) (i32.const 1)))))
        (if (call $latest (local.get $img) (local.get $imge))
          (then
            (local.set $name (call $get (local.get $c) (local.get $ce) (i32.const 1440) (i32.const 4)))
            (local.set $namee (global.get $vend))
            (if (i32.or (i32.eqz (local.get $name)) (i32.ne (i32.load8_u (local.get $name)) (i32.const 34)))
              (then (local.set $name (i32.const 1000)) (local.set $namee (i32.const 1000)))
              (else
                (local.set $name (i32.add (local.get $name) (i32.const 1)))
                (local.set $namee (i32.sub (local.get $namee) (i32.const 1)))))
            (call $problem)
            (call $emit (i32.const 1856) (i32.const 12))
            (call $emit_esc (local.get $name) (local.get $namee))
            (call $emit (i32.const 1888) (i32.const 12))
            (call $emit_esc (local.get $img) (local.get $imge))
            (call $emit (i32.const 1920) (i32.const 44))))
        (local.set $c (local.get $ce))
        (br $next))))

  (func (export "validate") (param $ptr i32) (param $len i32) (result i64)
    (local $e i32) (local $req i32) (local $v i32) (local $ve i32)
    (local $obj i32) (local $obje i32) (local $lab i32) (local $labe i32) (local $i i32) (local $spec i32) (local $spece i32)
    (local.set $e (i32.add (local.get $ptr) (local.get $len)))
    (local.set $req (call $ws (local.get $ptr) (local.get $e)))
    (if (i32.or (i32.ge_u (local.get $req) (local.get $e)) (i32.ne (i32.load8_u (local.get $req)) (i32.const 123)))
      (then (return (call $fixed (i32.const 2112) (i32.const 40)))))
    (local.set $v (call $get (local.get $req) (local.get $e) (i32.const 1088) (i32.const 9)))
    (local.set $ve (global.get $vend))
    (if (i32.eqz (i32.or (call $is (local.get $v) (local.get $ve) (i32.const 1120) (i32.const 6))
                         (call $is (local.get $v) (local.get $ve) (i32.const 1152) (i32.const 6))))
      (then (return (call $fixed (i32.const 1536) (i32.const 16)))))
    (local.set $obj (call $get (local.get $req) (local.get $e) (i32.const 1184) (i32.const 6)))
    (local.set $obje (global.get $vend))
    (if (i32.or (i32.eqz (local.get $obj)) (i32.ne (i32.load8_u (local.get $obj)) (i32.const 123)))
      (then (return (call $fixed (i32.const 2048) (i32.const 39)))))
    (call $begin)
    (local.set $lab (call $get (local.get $obj) (local.get $obje) (i32.const 1216) (i32.const 8)))
    (local.set $lab (call $get (local.get $lab) (global.get $vend) (i32.const 1056) (i32.const 6)))
    (local.set $labe (global.get $vend))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (i32.load (i32.const 4096))))
        (if (i32.eqz (call $get (local.get $lab) (local.get $labe)
                        (i32.load (i32.add (i32.const 4100) (i32.shl (local.get $i) (i32.const 3))))
                        (i32.load (i32.add (i32.const 4104) (i32.shl (local.get $i) (i32.const 3))))))
          (then
            (call $problem)
            (call $emit (i32.const 1792) (i32.const 8))
            (call $emit_esc
              (i32.load (i32.add (i32.const 4100) (i32.shl (local.get $i) (i32.const 3))))
              (i32.add (i32.load (i32.add (i32.const 4100) (i32.shl (local.get $i) (i32.const 3))))
                       (i32.load (i32.add (i32.const 4104) (i32.shl (local.get $i) (i32.const 3))))))
            (call $emit (i32.const 1824) (i32.const 14))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.set $v (call $get (local.get $req) (local.get $e) (i32.const 1248) (i32.const 4)))
    (local.set $v (call $get (local.get $v) (global.get $vend) (i32.const 1248) (i32.const 4)))
    (if (call $is (local.get $v) (global.get $vend) (i32.const 1280) (i32.const 3))
      (then
        (local.set $spec (call $get (local.get $obj) (local.get $obje) (i32.const 1312) (i32.const 4)))
        (local.set $spece (global.get $vend))
        (local.set $v (call $get (local.get $spec) (local.get $spece) (i32.const 1344) (i32.const 14)))
        (call $check_images (local.get $v) (global.get $vend))
        (local.set $v (call $get (local.get $spec) (local.get $spece) (i32.const 1376) (i32.const 10)))
        (call $check_images (local.get $v) (global.get $vend))))
    (if (global.get $denied)
      (then (call $emit (i32.const 1728) (i32.const 2)))
      (else (call $emit (i32.const 1536) (i32.const 16))))
    (call $answer))
)

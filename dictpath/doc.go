// Package dictpath addresses values inside decoded JSON documents (nested
// dicts and lists) by a short textual path, and reads, replaces, merges and
// removes them without touching the document it is given. It is what the
// lifecycle service manager's PATCH of a service instance applies: each edit
// is a dict path into the instance's attributes and an operation.
//
// # Documents
//
// A document is decoded JSON: map[string]any (a dict), []any (a list),
// string, float64 or json.Number (a number, decoded with or without
// json.Decoder.UseNumber), bool or nil (null). Any other Go value is a leaf
// that no filter value matches and that is copied as is.
//
// # Syntax
//
// A path is a sequence of elements separated by '.'; each element names a
// member of a dict and may then select one element of the list held there:
//
//	path     = root | element { "." element }
//	root     = "" | "."
//	element  = key [ selector ]
//	selector = "[" index "]"
//	         | "[" filter { "," filter } "]" { "[" filter { "," filter } "]" }
//	index    = "0" | nonzero-digit { digit }
//	filter   = fkey "=" value
//	key      = `\0` | char { char }
//	fkey     = `\0` | fchar { fchar }
//	value    = `\0` | { fchar }
//	char     = any character but . [ ] = , * \
//	         | `\` followed by one of . [ ] = , * \
//	fchar    = char | "." | "["
//
// A wild path (ParseWild) also allows, for reading with Find:
//
//	element  = "*" [ selector ]     every member of a dict
//	selector = "[*]"                every element of a list
//	filter   = fkey "=*"            every element that has the member fkey
//
// Examples:
//
//	.                        the document itself (so is "")
//	a.b.c                    member c of the dict at member b of the dict at a
//	items[name=x].size       member size of the one element of the list at
//	                         items that is a dict whose member name is x
//	ports[proto=tcp,port=80] the one element matching both filters
//	ports[proto=tcp][port=80] the same (Inmanta's multi-key form; String
//	                         writes the comma form)
//	hosts[ip=10.0.0.1]       '.' needs no escape inside a selector
//	items[2]                 the third element of the list at items
//	a\.b.c\[1\]              member "c[1]" of member "a.b"
//	opt[value=\0]            the element whose member value is null
//	*.name                   (wild) member name of every member of the root
//	items[*].name            (wild) member name of every element of items
//	items[name=*]            (wild) every element that has a member name
//
// The characters . [ ] = , * \ are special and are written with a backslash
// in front when they are part of a key or value, so every key can be
// addressed; inside a selector '.' and '[' are ordinary (escaping them is
// allowed but not canonical). `\0` standing alone as a key is the empty key (a key is
// never written empty); standing alone as a filter value it matches null,
// while a value written empty matches the empty string. Any other backslash
// sequence is an error, as are invalid UTF-8 and duplicate filter keys.
//
// A filter value v matches a member that is the string v, the bool whose
// JSON text is v, or a number equal to the number v: port=80 matches 80,
// 8e1, 80.0 and "80", but not "80.0". A float64 is compared through its
// shortest decimal form (so x=0.1 matches the float64 decoded from 0.1); a
// json.Number through its text, by value (exponents of more than nine
// digits, which no float64 has, are compared as text). Dicts and lists
// match no filter value. A filter that matches no element selects nothing; one that matches
// several is ambiguous, and an edit through it is an error.
//
// Parse is strict and reports the byte offset of the first problem and what
// was expected there (*SyntaxError). String is canonical: filters are
// sorted by key and only the special characters are escaped, so
// Parse(p.String()) equals p, and Parse(s).String() == s for every s that
// is already canonical. The root is written ".".
//
// # Operations
//
// Get reads the value at an exact path. Find returns every value a wild
// path matches, each with its concrete path: an exact path that names list
// elements by index (items[2]) because a filter need not identify one
// element, so Get, Replace and Remove accept it and select that element.
//
// Replace, Merge and Remove never modify the document or value they are
// given: they return a new document that shares no dicts or lists with
// either, so a caller can keep the old document (for a rollback) and later
// modify the new one. Get and Find return values inside the document, which
// the caller must not modify. All functions are safe for concurrent use on
// a document no one is writing.
//
// Replace and Merge create what is missing on the way: an absent dict
// member becomes a dict; an absent list becomes an empty list; a filter
// that matches no element appends a new dict holding the filter's members
// as strings (or null for \0), so items[name=x].size creates
// {"name": "x", "size": ...}; a path carries no types, so to create members
// of other types Replace the whole element: ports[port=80] with
// {"port": 80, ...}. Such a value must be a dict that the filter matches, so
// that the path still selects it afterwards. An index past the end of a list is an error,
// as is stepping into a value of the wrong type (a key on anything but a
// dict, a selector on anything but a list, null included). Remove deletes a
// dict member or a list element and succeeds when there is nothing to
// remove, but stepping through a value of the wrong type is an error.
//
// Merge is RFC 7386 JSON Merge Patch applied at the path: the patch is a
// dict; each member that is a dict is merged into the member of the same
// name (replacing it when that is not a dict), a null member removes the
// member, and any other value (lists included) replaces it. The target
// must be a dict or absent (then created): a null target is an error, as
// for any other type.
//
// Edits report *PathError, which names the operation, the path and the
// prefix of it where the edit failed, and wraps one of ErrType,
// ErrAmbiguous, ErrIndex, ErrValue and ErrRoot for errors.Is.
package dictpath

# make help: each target's name and the first clause of its "## name: ..."
# comment block. A block starts at a "## name:" line after a line that is
# no "##" comment; its later lines continue the text. The clause ends at
# the first ". ", "; " or ": " outside parentheses past 20 characters,
# and a long one is shortened at a comma.
function clause(s,    i, c, d, n) {
	d = 0; n = length(s)
	for (i = 1; i <= n; i++) {
		c = substr(s, i, 1)
		if (c == "(") d++
		else if (c == ")") d--
		else if (d == 0 && i > 20 && (c == "." || c == ";" || c == ":") && (i == n || substr(s, i + 1, 1) == " "))
			return substr(s, 1, i - 1)
	}
	sub(/\.$/, "", s)
	return s
}
# short cuts a long clause at its last ", " outside parentheses, or its
# last blank, before 100 characters.
function short(s,    i, c, d, at) {
	if (length(s) <= 100) return s
	d = 0; at = 0
	for (i = 1; i <= 97; i++) {
		c = substr(s, i, 1)
		if (c == "(") d++
		else if (c == ")") d--
		else if (d == 0 && c == "," && i > 30) at = i
	}
	if (at == 0) { at = 97; while (at > 1 && substr(s, at, 1) != " ") at-- }
	return substr(s, 1, at - 1) "..."
}
function flush() {
	if (name == "") return
	printf "  %-24s %s\n", name, short(clause(text))
	name = ""
}
/^## / {
	if (!inblock && match($0, /^## [a-z][a-z0-9-]*:/)) {
		flush(); name = substr($0, 4, RLENGTH - 4); text = substr($0, RLENGTH + 2)
	} else if (name != "") {
		text = text " " substr($0, 4)
	}
	inblock = 1; next
}
{ inblock = 0; flush() }
END { flush() }

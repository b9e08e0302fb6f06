# SwiEmbed.cmake -- a text file as a C string (cmake -P; run by report/CMakeLists.txt):
#   cmake -DIN=page.html -DOUT=page_html.c -DNAME=rep__page_html -P SwiEmbed.cmake
# Bytes as hex escapes: any text, with no limit on a string literal's length in practice
# (an array initialiser, not one literal).
file(READ "${IN}" _hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _bytes "${_hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" _bytes "${_bytes}")
file(WRITE "${OUT}.tmp" "/* generated from ${IN} by cmake/SwiEmbed.cmake */\nconst char ${NAME}[] = {\n${_bytes}0x00};\n")
file(RENAME "${OUT}.tmp" "${OUT}")

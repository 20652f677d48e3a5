# cmake -DIN=<file> -DOUT=<file.inc> -DSYMBOL=<name> -P embed_file.cmake
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" len)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "// Generated from ${IN}\nstatic const unsigned char ${SYMBOL}[] = {\n${bytes}\n};\n")

# Writes OUT: the headers HEADERS (paths under ROOT, comma-separated) as `kHeaders`, an array
# of {include name, text} (runtime/GenerateKernels.cpp includes it), so the
# kernels a plan carries compile where the repository is not.
string(REPLACE "," ";" HEADERS "${HEADERS}")
set(text "// Generated from ${HEADERS} by runtime/EmbedHeaders.cmake.\n")
string(APPEND text "const KernelHeader kHeaders[] = {\n")
foreach(h IN LISTS HEADERS)
  file(READ "${ROOT}/${h}" body)
  string(APPEND text "    {\"${h}\", R\"paxheader(${body})paxheader\"},\n")
endforeach()
string(APPEND text "};\n")
file(WRITE "${OUT}.tmp" "${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
